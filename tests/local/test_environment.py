"""The replica environment as a pure function of the typed job (docs/reference/vertex.md §1)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vertexdist.errors import VertexdistError
from vertexdist.local.environment import (
    JobContext,
    child_environment,
    cluster_addresses,
    launcher_options,
    procs_per_node,
    replica_env,
    replica_slots,
    split_gpus,
)
from vertexdist.wire.job_spec import JobSpec, JobSpecError, parse_job_spec

CTX = JobContext(job_id="123", project="my-project", region="europe-west4", gcs_root="/runs/1/gcs")
PACKAGE = {
    "pythonModule": "trainer.task",
    "packageUris": ["gs://b/p.tar.gz"],
    "env": [{"name": "A", "value": "1"}],
}
REDUCER = {"imageUri": "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"}


def _job(workers: int = 0, reducers: int = 0, evaluators: int = 0, gpus: int = 0, **spec: Any) -> JobSpec:
    machine: dict[str, Any] = {"machineType": "a2-highgpu-4g"}
    if gpus:
        machine.update(acceleratorType="NVIDIA_TESLA_A100", acceleratorCount=gpus)
    train = {"machineSpec": machine, "pythonPackageSpec": PACKAGE}
    pools: list[dict[str, Any]] = [{**train, "replicaCount": 1}]
    pools.append({**train, "replicaCount": workers} if workers else {})
    pools.append(
        {"machineSpec": {"machineType": "n1-highcpu-16"}, "replicaCount": reducers, "containerSpec": REDUCER}
        if reducers
        else {}
    )
    pools.append({**train, "replicaCount": evaluators} if evaluators else {})
    return parse_job_spec({"workerPoolSpecs": pools, **spec})


def _envs(job: JobSpec, ctx: JobContext = CTX) -> dict[str, dict[str, str]]:
    slots = replica_slots(job)
    cluster = cluster_addresses(job, [20000 + i for i in range(len(slots))])
    return {slot.name: replica_env(job, ctx, cluster, slot) for slot in slots}


def test_two_node_job_matches_vertex_shape() -> None:
    envs = _envs(_job(workers=1, baseOutputDirectory={"outputUriPrefix": "gs://bkt/out/"}))
    chief, worker = envs["workerpool0-0"], envs["workerpool1-0"]
    spec = json.loads(worker["CLUSTER_SPEC"])
    assert spec["cluster"] == {"workerpool0": ["127.0.0.1:20000"], "workerpool1": ["127.0.0.1:20001"]}
    assert spec["environment"] == "cloud"
    assert spec["task"] == {"type": "workerpool1", "index": 0, "trial": ""}
    assert spec["job"]["workerPoolSpecs"][0]["replicaCount"] == 1
    tf = json.loads(worker["TF_CONFIG"])
    assert tf["cluster"] == {"chief": ["127.0.0.1:20000"], "worker": ["127.0.0.1:20001"]}
    assert tf["task"]["type"] == "worker" and tf["task"]["index"] == 0 and tf["environment"] == "cloud"
    assert (chief["MASTER_ADDR"], chief["MASTER_PORT"]) == ("127.0.0.1", "20000")
    assert (worker["MASTER_ADDR"], worker["MASTER_PORT"]) == ("127.0.0.1", "20000")
    assert (chief["WORLD_SIZE"], chief["RANK"], worker["WORLD_SIZE"], worker["RANK"]) == ("2", "0", "2", "1")
    assert worker["AIP_MODEL_DIR"] == "gs://bkt/out/model/"
    assert worker["AIP_CHECKPOINT_DIR"] == "gs://bkt/out/checkpoints/"
    assert worker["AIP_TENSORBOARD_LOG_DIR"] == "gs://bkt/out/logs/"
    assert (worker["CLOUD_ML_PROJECT_ID"], worker["CLOUD_ML_JOB_ID"], worker["CLOUD_ML_REGION"]) == (
        "my-project",
        "123",
        "europe-west4",
    )
    assert worker["VERTEXDIST_GCS_ROOT"] == "/runs/1/gcs" and worker["A"] == "1"


def test_single_replica_job_has_no_tf_config_and_no_torch_variables() -> None:
    env = _envs(_job())["workerpool0-0"]
    assert "CLUSTER_SPEC" in env
    for name in ("TF_CONFIG", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"):
        assert name not in env


def test_reducers_and_evaluators_are_in_the_cluster_but_never_ranks() -> None:
    envs = _envs(_job(workers=2, reducers=2, evaluators=1))
    assert set(envs) == {
        "workerpool0-0",
        "workerpool1-0",
        "workerpool1-1",
        "workerpool2-0",
        "workerpool2-1",
        "workerpool3-0",
    }
    assert {env["WORLD_SIZE"] for env in envs.values()} == {"3"}
    assert "RANK" not in envs["workerpool2-1"] and "RANK" not in envs["workerpool3-0"]
    tf = json.loads(envs["workerpool3-0"]["TF_CONFIG"])
    assert set(tf["cluster"]) == {"chief", "worker", "ps"}  # never evaluator
    assert tf["task"]["type"] == "evaluator"
    assert json.loads(envs["workerpool2-0"]["TF_CONFIG"])["task"]["type"] == "ps"
    assert "VERTEXDIST_NPROC_PER_NODE" not in envs["workerpool2-0"]


def test_output_dirs_fall_back_to_the_runs_location_only_without_a_base_output_directory() -> None:
    ctx = JobContext(**{**CTX.__dict__, "default_output_uri": "gs://vertexdist-local/123"})
    assert _envs(_job(), ctx)["workerpool0-0"]["AIP_MODEL_DIR"] == "gs://vertexdist-local/123/model/"
    assert "AIP_MODEL_DIR" not in _envs(_job())["workerpool0-0"]
    with_base = _job(baseOutputDirectory={"outputUriPrefix": "gs://b/o"})
    assert _envs(with_base, ctx)["workerpool0-0"]["AIP_MODEL_DIR"] == "gs://b/o/model/"


def test_procs_per_node_follow_the_gpus_unless_scaled() -> None:
    assert _envs(_job(workers=1, gpus=4))["workerpool1-0"]["VERTEXDIST_NPROC_PER_NODE"] == "4"
    assert _envs(_job(workers=1))["workerpool1-0"]["VERTEXDIST_NPROC_PER_NODE"] == "1"
    scaled = JobContext(**{**CTX.__dict__, "procs_per_replica": 1})
    assert _envs(_job(workers=1, gpus=4), scaled)["workerpool1-0"]["VERTEXDIST_NPROC_PER_NODE"] == "1"


def _launcher_pool(args: list[str], *, container: bool = False) -> Any:
    machine = {"machineType": "a2-highgpu-4g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 4}
    code: dict[str, Any]
    if container:
        code = {"containerSpec": {"imageUri": "x", "command": ["python", "-m", "vertexdist_launcher", *args]}}
    else:
        code = {"pythonPackageSpec": {**PACKAGE, "pythonModule": "vertexdist_launcher", "args": args}}
    return parse_job_spec({"workerPoolSpecs": [{"machineSpec": machine, "replicaCount": 1, **code}]}).pools[0]


@pytest.mark.parametrize("container", [False, True])
def test_the_launchers_processes_per_node_unless_scaled(container: bool) -> None:
    pool = _launcher_pool(["torchrun", "--nproc-per-node", "2", "--", "-m", "t"], container=container)
    assert procs_per_node(pool, None) == 2
    assert procs_per_node(pool, 3) == 3  # --procs-per-replica
    default = _launcher_pool(["torchrun", "--", "-m", "t"], container=container)
    assert procs_per_node(default, None) == 4  # the machine's GPUs, as the launcher counts them on Vertex
    assert launcher_options(_job().pools[0]) is None  # `python -m trainer.task`: no launcher


def test_wrong_launcher_arguments_name_the_pool() -> None:
    with pytest.raises(JobSpecError, match="workerpool0: the vertexdist_launcher arguments are wrong"):
        procs_per_node(_launcher_pool(["torchrun", "--nproc-per-node", "0", "--", "-m", "t"]), None)


def test_platform_variables_win_over_the_pools_env() -> None:
    job = parse_job_spec(
        {
            "workerPoolSpecs": [
                {
                    "replicaCount": 1,
                    "pythonPackageSpec": {**PACKAGE, "env": [{"name": "CLOUD_ML_JOB_ID", "value": "mine"}]},
                }
            ]
        }
    )
    assert _envs(job)["workerpool0-0"]["CLOUD_ML_JOB_ID"] == "123"


def test_gpus_are_split_per_replica_and_cpu_pools_get_none() -> None:
    job = _job(workers=1, reducers=1, gpus=2)
    assert split_gpus(job, ["0", "1", "2", "3"], None) == {
        "workerpool0-0": "0,1",
        "workerpool1-0": "2,3",
        "workerpool2-0": "",
    }
    assert split_gpus(job, ["4", "5"], 1) == {"workerpool0-0": "4", "workerpool1-0": "5", "workerpool2-0": ""}
    assert split_gpus(job, [], None) == {}


def test_too_few_gpus_is_a_clear_error() -> None:
    with pytest.raises(VertexdistError, match=r"needs 8 GPUs .* has 4 visible") as info:
        split_gpus(_job(workers=1, gpus=4), ["0", "1", "2", "3"], None)
    assert info.value.hint is not None and "--procs-per-replica" in info.value.hint


def test_child_environment_drops_stray_launcher_variables() -> None:
    base = {
        "PATH": "/bin",
        "RANK": "7",
        "LOCAL_RANK": "3",
        "TORCHELASTIC_RUN_ID": "x",
        "AIP_MODEL_DIR": "old",
        "HOME": "/h",
    }
    env = child_environment(base, {"CLUSTER_SPEC": "{}"})
    assert env == {"PATH": "/bin", "HOME": "/h", "PYTHONUNBUFFERED": "1", "CLUSTER_SPEC": "{}"}


def test_child_environment_keeps_gpus_hidden_by_the_user_and_gives_replicas_their_own() -> None:
    hidden = {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": ""}
    assert child_environment(hidden, {"CLUSTER_SPEC": "{}"})["CUDA_VISIBLE_DEVICES"] == ""
    shared = {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    assert child_environment(shared, {"CUDA_VISIBLE_DEVICES": "2,3"})["CUDA_VISIBLE_DEVICES"] == "2,3"


@settings(max_examples=60, deadline=None)
@given(
    workers=st.integers(0, 5),
    reducers=st.integers(0, 3),
    evaluators=st.integers(0, 2),
)
def test_every_replica_sees_the_same_cluster_and_ranks_match_it(
    workers: int, reducers: int, evaluators: int
) -> None:
    job = _job(workers=workers, reducers=reducers, evaluators=evaluators)
    envs = _envs(job)
    specs = {name: json.loads(env["CLUSTER_SPEC"]) for name, env in envs.items()}
    clusters = {json.dumps(spec["cluster"], sort_keys=True) for spec in specs.values()}
    assert len(clusters) == 1
    cluster = next(iter(specs.values()))["cluster"]
    all_addresses = [a for addresses in cluster.values() for a in addresses]
    assert len(all_addresses) == len(set(all_addresses)) == len(envs)
    nodes = 1 + workers
    distributed = len(envs) > 1
    ranks = []
    for name, env in envs.items():
        task = specs[name]["task"]
        assert f"{task['type']}-{task['index']}" == name
        assert cluster[task["type"]][task["index"]] in all_addresses
        if not distributed:
            assert "WORLD_SIZE" not in env and "TF_CONFIG" not in env
            continue
        assert env["WORLD_SIZE"] == str(nodes)
        assert f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}" == cluster["workerpool0"][0]
        if task["type"] in ("workerpool0", "workerpool1"):
            ranks.append(int(env["RANK"]))
        else:
            assert "RANK" not in env
        assert "evaluator" not in json.loads(env["TF_CONFIG"])["cluster"]
    if distributed:
        assert sorted(ranks) == list(range(nodes))


def test_a_job_with_an_experiment_names_it_and_its_run_to_its_replicas() -> None:
    """jobSpec.experiment / experimentRun reach the replicas as AIP_EXPERIMENT_NAME / _RUN_NAME, where
    the SDK's aiplatform.autolog() (from_local_script(enable_autolog=True)) reads them; else neither."""
    context = "projects/p/locations/l/metadataStores/default/contexts/"
    job = _job(experiment=context + "exp", experimentRun=context + "exp-run1")
    chief = _envs(job)["workerpool0-0"]
    assert chief["AIP_EXPERIMENT_NAME"] == context + "exp"
    assert chief["AIP_EXPERIMENT_RUN_NAME"] == context + "exp-run1"
    assert "AIP_EXPERIMENT_NAME" not in _envs(_job())["workerpool0-0"]
