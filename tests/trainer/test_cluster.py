"""Cluster detection from realistic Vertex, torchrun and bare environments (pure: no processes, no torch)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trainer_pkg.cluster import (
    ClusterInfo,
    SingleProcessEnvironment,
    TorchElasticEnvironment,
    VertexEnvironment,
    detect_cluster,
    detect_placement,
    visible_gpu_count,
)
from trainer_pkg.errors import TrainerError

THREE_POOLS = {
    "cluster": {
        "workerpool0": ["cmle-training-workerpool0-ab12-0:2222"],
        "workerpool1": ["cmle-training-workerpool1-ab12-0:2222", "cmle-training-workerpool1-ab12-1:2222"],
        "workerpool2": ["cmle-training-workerpool2-ab12-0:2222", "cmle-training-workerpool2-ab12-1:2222"],
    },
    "environment": "cloud",
    "task": {"type": "workerpool0", "index": 0, "trial": ""},
    "job": {"worker_pool_specs": [{"replica_count": 1}]},
}


def vertex_env(spec: dict[str, object], task_type: str, index: int, **extra: str) -> dict[str, str]:
    spec = {**spec, "task": {"type": task_type, "index": index, "trial": ""}}
    return {"CLUSTER_SPEC": json.dumps(spec), **extra}


@pytest.mark.parametrize(
    ("task_type", "index", "role", "node_rank"),
    [
        ("workerpool0", 0, "chief", 0),
        ("workerpool1", 0, "worker", 1),
        ("workerpool1", 1, "worker", 2),
        ("workerpool2", 1, "reduction_server", None),
    ],
)
def test_three_pools_with_reduction_servers(
    task_type: str, index: int, role: str, node_rank: int | None
) -> None:
    env = vertex_env(
        THREE_POOLS, task_type, index, MASTER_ADDR="workerpool0-9b6f87bcee-0", MASTER_PORT="2222"
    )
    info = detect_cluster(nproc_flag=4, env=env)
    assert info.placement.environment == "vertex"
    assert info.as_json() == {
        "role": role,
        "node_rank": node_rank,
        "num_nodes": 3,  # reducers are not nodes of the training job
        "master_addr": "workerpool0-9b6f87bcee-0",
        "master_port": 2222,
        "nproc_per_node": 4 if node_rank is not None else 0,
        "world_size": 12 if node_rank is not None else None,
    }


def test_master_comes_from_workerpool0_when_master_vars_are_missing() -> None:
    placement = detect_placement(vertex_env(THREE_POOLS, "workerpool1", 1))
    assert (placement.master_addr, placement.master_port) == ("cmle-training-workerpool0-ab12-0", 2222)


def test_evaluator_pool_is_not_a_rank() -> None:
    spec = {"cluster": {"workerpool0": ["a:1"], "workerpool1": ["b:1"], "workerpool3": ["e:1"]}}
    placement = detect_placement(vertex_env(spec, "workerpool3", 0))
    assert (placement.role, placement.node_rank, placement.num_nodes) == ("evaluator", None, 2)
    assert not placement.is_training_node


def test_single_replica_job_talks_to_itself() -> None:
    # Vertex sets neither MASTER_* nor TF_CONFIG for one replica; the job field is a JSON string in practice.
    raw = json.dumps(
        {
            "cluster": {"workerpool0": ["cmle-training-workerpool0-ab12-0:2222"]},
            "environment": "cloud",
            "task": {"type": "workerpool0", "index": 0},
            "job": '{"python_module":"","package_uris":[],"job_args":[]}',
        }
    )
    info = detect_cluster(env={"CLUSTER_SPEC": raw})
    assert info.as_json() == {
        "role": "chief",
        "node_rank": 0,
        "num_nodes": 1,
        "master_addr": "127.0.0.1",
        "master_port": None,
        "nproc_per_node": 1,
        "world_size": 1,
    }


def test_task_index_as_string_and_missing_job_are_accepted() -> None:
    spec = {
        "cluster": {"workerpool0": ["a:5"], "workerpool1": ["b:6", "c:7"]},
        "task": {"type": "workerpool1", "index": "1"},
    }
    placement = detect_placement({"CLUSTER_SPEC": json.dumps(spec)})
    assert placement.node_rank == 2


def test_torchrun_environment_wins_over_cluster_spec() -> None:
    env = vertex_env(THREE_POOLS, "workerpool1", 0) | {
        "RANK": "5",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "8",
        "LOCAL_WORLD_SIZE": "4",
        "GROUP_RANK": "1",
        "GROUP_WORLD_SIZE": "2",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
    }
    info = detect_cluster(nproc_flag=2, env=env)  # torchrun has decided the process count already
    assert info.placement.environment == TorchElasticEnvironment.name
    assert (info.placement.process_rank, info.placement.local_rank) == (5, 1)
    assert info.as_json()["world_size"] == 8
    assert info.as_json()["role"] == "worker"


def test_vertex_rank_and_world_size_alone_are_not_torchrun() -> None:
    env = vertex_env(THREE_POOLS, "workerpool1", 0, RANK="1", WORLD_SIZE="3")
    assert TorchElasticEnvironment.detect(env) is False
    assert VertexEnvironment.detect(env) is True


def test_nothing_set_is_a_single_process() -> None:
    info = detect_cluster(env={})
    assert info.placement.environment == SingleProcessEnvironment.name
    assert (info.placement.node_rank, info.world_size, info.placement.master_port) == (0, 1, None)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"VERTEXDIST_NPROC_PER_NODE": "3"}, 3),
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, 2),
        ({"CUDA_VISIBLE_DEVICES": ""}, 1),
        ({"CUDA_VISIBLE_DEVICES": "2,-1,3"}, 1),  # CUDA stops at the first invalid id: only GPU 2
    ],
)
def test_processes_per_node(env: dict[str, str], expected: int) -> None:
    assert detect_cluster(env=env).nproc_per_node == expected


def test_flag_beats_the_variable() -> None:
    assert detect_cluster(nproc_flag=2, env={"VERTEXDIST_NPROC_PER_NODE": "3"}).nproc_per_node == 2


def test_gpu_count_from_cuda_visible_devices() -> None:
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "4,5,6"}) == 3


def test_global_ranks() -> None:
    info = ClusterInfo(detect_placement(vertex_env(THREE_POOLS, "workerpool1", 1)), nproc_per_node=2)
    assert [info.global_rank(i) for i in range(2)] == [4, 5]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "CLUSTER_SPEC is not valid JSON"),
        ("[1, 2]", "CLUSTER_SPEC must be a JSON object"),
        ('{"task": {"type": "workerpool0", "index": 0}}', "'cluster' must be an object"),
        ('{"cluster": {"workerpool0": ["a:1"]}}', "'task' must be an object"),
        (
            '{"cluster": {"workerpool0": ["a:1"]}, "task": {"type": "workerpool1", "index": 0}}',
            "task.type 'workerpool1' is not a pool in 'cluster' (workerpool0)",
        ),
        (
            '{"cluster": {"workerpool0": ["a:1"], "workerpool1": ["b:1"]}, '
            '"task": {"type": "workerpool1", "index": 1}}',
            "task.index 1 is out of range for workerpool1 (1 replica(s))",
        ),
        (
            '{"cluster": {"workerpool0": ["a:1"]}, "task": {"type": "workerpool0", "index": -1}}',
            "task.index -1 is out of range",
        ),
        ('{"cluster": {"chief": ["a:1"]}, "task": {"type": "chief", "index": 0}}', "unknown pool 'chief'"),
        (
            '{"cluster": {"workerpool0": ["a"]}, "task": {"type": "workerpool0", "index": 0}}',
            "expected 'host:port'",
        ),
        (
            '{"cluster": {"workerpool0": ["a:1", "b:1"]}, "task": {"type": "workerpool0", "index": 0}}',
            "exactly one replica",
        ),
        (
            '{"cluster": {"workerpool0": ["a:1"]}, "task": {"type": "workerpool0", "index": "x"}}',
            "not an integer",
        ),
    ],
)
def test_bad_cluster_spec_names_the_variable(raw: str, message: str) -> None:
    with pytest.raises(TrainerError) as caught:
        detect_placement({"CLUSTER_SPEC": raw})
    assert message in caught.value.message
    assert "CLUSTER_SPEC" in caught.value.message


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MASTER_PORT": "http"}, "MASTER_PORT='http' is not an integer"),
        ({"MASTER_PORT": "99999"}, "MASTER_PORT='99999' must be at most 65535"),
        (
            {
                "MASTER_PORT": "70000",
                "CLUSTER_SPEC": json.dumps(
                    {
                        "cluster": {"workerpool0": ["h0:2222"], "workerpool1": ["h1:2222"]},
                        "task": {"type": "workerpool1", "index": 0},
                    }
                ),
            },
            "MASTER_PORT='70000' must be at most 65535",
        ),
        ({"VERTEXDIST_NPROC_PER_NODE": "0"}, "VERTEXDIST_NPROC_PER_NODE='0' must be at least 1"),
        ({"VERTEXDIST_NPROC_PER_NODE": "two"}, "VERTEXDIST_NPROC_PER_NODE='two' is not an integer"),
    ],
)
def test_bad_variables_are_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(TrainerError, match=message.replace("(", r"\(")):
        detect_cluster(env=env)


def test_cluster_module_prints_one_json_object(kit: Any) -> None:
    result = kit.run_module(
        "trainer_pkg.cluster",
        vertex_env(THREE_POOLS, "workerpool1", 0, MASTER_PORT="2223"),
        "--nproc-per-node",
        "2",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "role": "worker",
        "node_rank": 1,
        "num_nodes": 3,
        "master_addr": "cmle-training-workerpool0-ab12-0",
        "master_port": 2223,
        "nproc_per_node": 2,
        "world_size": 6,
    }


def test_cluster_module_reports_bad_spec_in_one_line(kit: Any) -> None:
    result = kit.run_module("trainer_pkg.cluster", {"CLUSTER_SPEC": "{"})
    assert result.returncode == 1
    assert result.stderr.startswith("error: CLUSTER_SPEC is not valid JSON")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("task_type", ["workerpool2", "workerpool3"])
def test_reducer_and_evaluator_replicas_exit_cleanly(task_type: str, kit: Any) -> None:
    spec = {"cluster": {"workerpool0": ["a:1"], task_type: ["r:1"]}}
    result = kit.run_module("trainer_pkg.task", vertex_env(spec, task_type, 0))
    assert result.returncode == 0, result.stderr
    assert "not a training rank" in result.stdout


def test_task_reports_bad_cluster_spec_without_traceback(kit: Any) -> None:
    spec = {"cluster": {"workerpool0": ["a:1"]}}
    result = kit.run_module("trainer_pkg.task", vertex_env(spec, "workerpool1", 0))
    assert result.returncode == 1
    assert "error: CLUSTER_SPEC: task.type 'workerpool1' is not a pool" in result.stderr
    assert "Traceback" not in result.stderr
