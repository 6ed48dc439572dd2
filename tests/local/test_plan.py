"""The launch plan: argv, env, working folder and log file per replica, built without starting anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vertexdist.local.environment import JobContext
from vertexdist.local.plan import build_plan
from vertexdist.shipped import LAUNCHER_DIR
from vertexdist.wire.job_spec import JobSpecError, parse_job_spec

CTX = JobContext(job_id="j", project="my-project", region="us-central1", gcs_root="/r/gcs")
URI = "gs://b/vertexdist/packages/abc/trainer-0.1.tar.gz"
PACKAGE = {"pythonModule": "trainer.task", "packageUris": [URI], "args": ["--epochs=2", "--lr=0.1"]}
REDUCER = {"imageUri": "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"}


def _spec(**scheduling: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "workerPoolSpecs": [
            {"replicaCount": 1, "pythonPackageSpec": PACKAGE},
            {
                "replicaCount": 1,
                "containerSpec": {"imageUri": "x", "command": ["run-me", "--flag"], "args": ["a"]},
            },
            {"replicaCount": 1, "containerSpec": REDUCER},
        ]
    }
    if scheduling:
        spec["scheduling"] = scheduling
    return spec


def _plan(spec: dict[str, Any], **kwargs: Any) -> Any:
    return build_plan(
        parse_job_spec(spec),
        CTX,
        ports=[1001, 1002, 1003],
        run_dir=Path("/r"),
        python="/py",
        package_dirs={URI: "/cache/abc"},
        **kwargs,
    )


def test_each_replica_gets_argv_env_cwd_and_log() -> None:
    plan = _plan(_spec())
    chief, worker, reducer = plan.replicas
    # The chief of a loopback rendezvous holds torch's store on loopback first (rendezvous_store).
    store = ("/py", "-m", "vertexdist_launcher.rendezvous_store")
    assert chief.argv == (*store, "-m", "trainer.task", "--epochs=2", "--lr=0.1")
    assert chief.env["PYTHONPATH"] == f"{LAUNCHER_DIR.parent}:/cache/abc"
    assert chief.kind == "trainer" and chief.is_training
    assert worker.argv == ("run-me", "--flag", "a") and worker.kind == "container"
    assert "PYTHONPATH" not in worker.env
    assert reducer.kind == "standin" and not reducer.is_training
    assert reducer.argv[-3:] == ("127.0.0.1", "1003", "workerpool2-0")
    assert chief.cwd == Path("/r/replicas/workerpool0-0")
    assert worker.log_path == Path("/r/logs/workerpool1-0.log")
    assert [r.address for r in plan.replicas] == ["127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"]


def test_restarts_only_when_the_job_asks_and_retries_are_allowed() -> None:
    assert _plan(_spec()).max_restarts == 0
    assert _plan(_spec(restartJobOnWorkerRestart=True)).max_restarts == 3
    assert _plan(_spec(restartJobOnWorkerRestart=True), max_restarts=5).max_restarts == 5
    assert _plan(_spec(restartJobOnWorkerRestart=True, disableRetries=True)).max_restarts == 0
    assert _plan(_spec(timeout="30s")).timeout_s == 30.0


def test_a_package_that_was_not_fetched_is_an_error() -> None:
    with pytest.raises(JobSpecError, match="was not fetched"):
        build_plan(
            parse_job_spec(_spec()), CTX, ports=[1, 2, 3], run_dir=Path("/r"), python="/py", package_dirs={}
        )


def test_plan_dict_is_json_and_masks_secrets_unless_asked_not_to() -> None:
    spec = _spec()
    spec["workerPoolSpecs"][0]["pythonPackageSpec"] = {
        **PACKAGE,
        "env": [{"name": "API_TOKEN", "value": "s3cret"}],
    }
    plan = _plan(spec)
    shown = plan.to_dict()
    text = json.dumps(shown)
    assert "s3cret" not in text  # neither in the env nor inside CLUSTER_SPEC's copy of the job
    assert shown["replicas"][0]["env"]["API_TOKEN"] == "********"
    assert plan.to_dict(masked=False)["replicas"][0]["env"]["API_TOKEN"] == "s3cret"
    assert plan.replicas[0].env["CLOUD_ML_PROJECT_ID"] == "my-project"


def test_every_replica_of_the_users_own_module_starts_the_rank_watcher_first() -> None:
    """`launcher: python`: the chief through the store's runner, the other replicas through `watched`; both
    start the health watcher before the module. The bundled trainer starts its own."""
    spec = _spec()
    spec["workerPoolSpecs"][1] = {"replicaCount": 2, "pythonPackageSpec": PACKAGE}
    job = parse_job_spec(spec)
    plan = build_plan(
        job, CTX, ports=[1, 2, 3, 4], run_dir=Path("/r"), python="/py", package_dirs={URI: "/cache/abc"}
    )
    chief, worker, other, _ = plan.replicas
    assert chief.argv[:3] == ("/py", "-m", "vertexdist_launcher.rendezvous_store")
    module = ("-m", "trainer.task", "--epochs=2", "--lr=0.1")
    for replica in (worker, other):
        assert replica.argv == ("/py", "-m", "vertexdist_launcher.watched", *module)
        assert replica.env["PYTHONPATH"] == f"{LAUNCHER_DIR.parent}:/cache/abc"
    spec["workerPoolSpecs"][1] = {
        "replicaCount": 1,
        "pythonPackageSpec": {**PACKAGE, "pythonModule": "trainer_pkg.task"},
    }
    assert _plan(spec).replicas[1].argv[:3] == ("/py", "-m", "trainer_pkg.task")


# The user's own module under `launcher: python`, as vertexdist renders it now (through the shipped launcher's
# `watched` runner, so that Vertex starts the rank's watcher too) and as older versions submitted it.
RENDERED = {
    **PACKAGE,
    "pythonModule": "vertexdist_launcher.watched",
    "args": ["-m", "trainer.task", *PACKAGE["args"]],
}


@pytest.mark.parametrize("package", [RENDERED, PACKAGE], ids=["watched", "older-job"])
def test_the_users_module_is_wrapped_once_whichever_way_the_job_names_it(package: dict[str, Any]) -> None:
    """One runner in front of the module, never two: the store's runner on a loopback chief (in place of a
    rendered `watched`), `watched` on the other replicas; a job that names the module itself gets the same."""
    spec = _spec()
    spec["workerPoolSpecs"][0] = {"replicaCount": 1, "pythonPackageSpec": package}
    spec["workerPoolSpecs"][1] = {"replicaCount": 2, "pythonPackageSpec": package}
    plan = build_plan(
        parse_job_spec(spec),
        CTX,
        ports=[1, 2, 3, 4],
        run_dir=Path("/r"),
        python="/py",
        package_dirs={URI: "/c"},
    )
    chief, worker, other, _ = plan.replicas
    module = ("-m", "trainer.task", "--epochs=2", "--lr=0.1")
    assert chief.argv == ("/py", "-m", "vertexdist_launcher.rendezvous_store", *module)
    for replica in (worker, other):
        assert replica.argv == ("/py", "-m", "vertexdist_launcher.watched", *module)
        assert replica.env["PYTHONPATH"] == f"{LAUNCHER_DIR.parent}:/c"
