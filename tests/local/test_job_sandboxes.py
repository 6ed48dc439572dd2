"""The local backend's issue-17 parts, without the emulator: the metadata server as google-auth reads it,
requirements read from package metadata and installed into a cached job environment (local-run too), and
container commands isolated from the host."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from vertexdist.local.isolated_container import (
    NoContainerRuntime,
    gcs_objects,
    isolated_replica,
    map_gcs_paths,
)
from vertexdist.local.metadata_server import JobIdentity, MetadataServer, metadata_answer
from vertexdist.local.plan import ReplicaLaunch
from vertexdist.local.requirements_env import package_requirements, plan_env
from vertexdist.packaging import build_sdist

IDENTITY = JobIdentity("my-proj", "europe-west4", "123", "trainer@my-proj.iam.gserviceaccount.com")


def test_metadata_answers_what_google_auth_asks() -> None:
    assert metadata_answer(IDENTITY, "/computeMetadata/v1/project/project-id", {}) == (
        200,
        "application/text",
        "my-proj",
    )
    status, kind, info = metadata_answer(
        IDENTITY, "/computeMetadata/v1/instance/service-accounts/default/", {"recursive": "true"}
    )
    assert (status, kind, info["email"]) == (200, "application/json", IDENTITY.email)
    _, _, token = metadata_answer(IDENTITY, "/computeMetadata/v1/instance/service-accounts/default/token", {})
    assert token["token_type"] == "Bearer" and token["expires_in"] > 0
    assert metadata_answer(IDENTITY, "/computeMetadata/v1/instance/attributes/ssh-keys", {})[0] == 404
    assert JobIdentity("p", "r", "j").email == "service-p@gcp-sa-aiplatform-cc.iam.gserviceaccount.com"


def test_google_auth_finds_the_job_identity_through_the_server(tmp_path: Path) -> None:
    """The real google-auth, in a child with NO_GCE_CHECK as tests set it, pointed at the server."""
    server = MetadataServer(IDENTITY).start()
    try:
        request = urllib.request.Request(f"http://{server.address}/computeMetadata/v1/project/project-id")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request)  # no Metadata-Flavor header: refused, as on GCE
        assert refused.value.code == 403
        code = textwrap.dedent(
            """
            import google.auth, google.auth.transport.requests
            credentials, project = google.auth.default()
            credentials.refresh(google.auth.transport.requests.Request())
            print(project, credentials.service_account_email, credentials.token)
            """
        )
        env = {
            "PATH": "/usr/bin:/bin",
            "NO_GCE_CHECK": "true",
            **server.env(),
            "CLOUDSDK_CONFIG": str(tmp_path),
        }
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
        )
    finally:
        server.stop()
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["my-proj", IDENTITY.email, "ya29.vertexdist-local-123"]


def _sdist(tmp_path: Path, requirements: list[str]) -> Path:
    package = tmp_path / "pkg"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    trainer = SimpleNamespace(package=package, script=None, requirements=requirements)
    return build_sdist(trainer, tmp_path / "dist").path


def test_requirements_come_from_package_metadata(tmp_path: Path, wheelhouse: Path) -> None:
    assert package_requirements(_sdist(tmp_path, ["vdreqdemo>=1", "rich; extra == 'ui'"])) == (
        "vdreqdemo>=1",
    )
    assert package_requirements(next(wheelhouse.glob("*.whl"))) == ()
    envs = tmp_path / "envs"
    assert plan_env([_sdist(tmp_path / "a", [])], envs) is None  # the no-deps fast path
    one = plan_env([_sdist(tmp_path / "b", ["vdreqdemo"])], envs)
    other_code_same_requirements = plan_env([_sdist(tmp_path / "c", ["vdreqdemo"])], envs)
    assert one is not None and other_code_same_requirements is not None
    assert one.path == other_code_same_requirements.path  # keyed by the requirement set, not the code


def test_local_run_installs_requirements_in_a_job_env(
    tmp_path: Path, offline_pip: Path, pip_freeze: Callable[[], str]
) -> None:
    before = pip_freeze()
    (tmp_path / "train.py").write_text("import sys, vdreqdemo\nprint('value', vdreqdemo.VALUE, sys.prefix)\n")
    doc = {
        "display_name": "reqs",
        "project": "my-project",
        "staging_bucket": "gs://my-bucket/staging",
        "trainer": {"script": "train.py", "requirements": ["vdreqdemo"]},
        "replica_count": 1,
    }
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(doc))
    out = subprocess.run(
        [sys.executable, "-m", "vertexdist", "local-run", "job.yaml", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    logs = "".join(p.read_text() for p in tmp_path.glob(".vertexdist/**/logs/*.log"))
    assert "value 42" in logs
    assert "/envs/" in logs  # the job's own environment, not this interpreter
    assert pip_freeze() == before


def _launch(argv: tuple[str, ...]) -> ReplicaLaunch:
    return ReplicaLaunch(
        "workerpool0-0",
        0,
        0,
        "container",
        argv,
        {"AIP_MODEL_DIR": "/gcs/b/out/model/"},
        Path("."),
        Path("x.log"),
        "",
    )


def test_gcs_paths_map_to_the_job_storage_folder(tmp_path: Path) -> None:
    cmd = "pip3 install -q --user /gcs/b/s/pkg-0.1.tar.gz && python3 -m task --out=/gcs/b/out /data/gcs/x"
    assert gcs_objects(["sh", "-c", cmd]) == ["gs://b/s/pkg-0.1.tar.gz", "gs://b/out"]
    assert map_gcs_paths(cmd, tmp_path).count(str(tmp_path)) == 2  # `/data/gcs/x` is not the mount
    isolated = isolated_replica(
        _launch(("python3", "-c", "pass")), tmp_path / "box", tmp_path / "gcs", "/usr/bin"
    )
    assert isolated.argv[0] == str(tmp_path / "box" / "env" / "bin" / "python")
    assert isolated.env["PYTHONUSERBASE"] == str(tmp_path / "box" / "user")
    assert isolated.env["AIP_MODEL_DIR"] == f"{tmp_path / 'gcs'}/b/out/model/"
    assert isolated.env["PATH"].startswith(str(tmp_path / "box" / "env" / "bin"))
    with pytest.raises(NoContainerRuntime, match="gives no command"):
        isolated_replica(_launch(()), tmp_path / "box", tmp_path / "gcs", "/usr/bin")


def test_metadata_server_env_reaches_emulator_free_jobs(tmp_path: Path) -> None:
    """start_job with serve_metadata: every replica gets the server's address, NO_GCE_CHECK off."""
    from vertexdist.local import JobContext, start_job

    spec = {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": 1,
                "containerSpec": {
                    "imageUri": "python:3.11",
                    "command": ["python3", "-c", "import os, json; print(json.dumps(dict(os.environ)))"],
                },
            }
        ]
    }
    ctx = JobContext(job_id="77", project="p", region="us-central1", gcs_root=str(tmp_path / "gcs"))
    job = start_job(
        spec, ctx, run_dir=tmp_path / "run", fetch_package=lambda uri: Path(uri), serve_metadata=True
    )
    result = job.wait(120)
    assert result is not None and result.state.name == "SUCCEEDED", result
    env = json.loads((tmp_path / "run" / "logs" / "workerpool0-0.log").read_text().strip().splitlines()[-1])
    assert env["NO_GCE_CHECK"] == "false" and env["GCE_METADATA_HOST"].startswith("127.0.0.1:")
    assert env["HOME"].startswith(str(tmp_path / "run" / "containers"))


def test_with_a_runtime_each_pool_runs_its_own_image_with_gcs_mounted(tmp_path: Path) -> None:
    from vertexdist.local.environment import JobContext
    from vertexdist.local.runtime_containers import runs_in_runtime, runtime_job_plan
    from vertexdist.wire.job_spec import parse_job_spec

    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1}
    spec = {"workerPoolSpecs": [{**pool, "containerSpec": {"imageUri": "python:3.11"}}]}  # ENTRYPOINT only
    job = parse_job_spec(spec, require_command=False)
    ctx = JobContext(job_id="9", project="p", region="us-central1", gcs_root=str(tmp_path / "gcs"))
    assert runs_in_runtime(job)
    argv = runtime_job_plan(job, ctx, tmp_path / "run", "podman").launch.replicas[0].argv
    assert argv[:2] == ("podman", "run") and f"{tmp_path / 'gcs'}:/gcs" in argv
    assert argv[-1] == "python:3.11" and "--entrypoint" not in argv
    package = {
        "pythonPackageSpec": {
            "executorImageUri": "x",
            "packageUris": ["gs://b/p.tar.gz"],
            "pythonModule": "m",
        }
    }
    assert not runs_in_runtime(parse_job_spec({"workerPoolSpecs": [{**pool, **package}]}))


def test_a_new_model_version_takes_its_aliases_from_older_ones() -> None:
    from vertexdist.emulator.vertex.models import version_of, with_version

    def version(vid: str, aliases: list[str]) -> dict[str, object]:
        return {"name": "m", "versionId": vid, "versionAliases": aliases, "createTime": vid}

    one = with_version(None, version("1", ["default", "prod"]))
    two = with_version(one, version("2", ["prod"]))
    assert two["versionId"] == "1" and two["versionAliases"] == ["default"]  # still the default
    assert version_of(two, "prod")["versionId"] == "2"  # type: ignore[index]
    three = with_version(two, version("3", ["default"]))
    assert (three["versionId"], three["createTime"]) == ("3", "1")
    assert version_of(three, "1")["versionAliases"] == []  # type: ignore[index]
    assert version_of(three, "9") is None
