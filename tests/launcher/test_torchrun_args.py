"""The launcher's torchrun arguments for every cluster shape, from CLUSTER_SPEC alone (pure functions)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from vertexdist.shipped.vertexdist_launcher.cluster import ClusterSpecError, placement
from vertexdist.shipped.vertexdist_launcher.options import parse_launch_args
from vertexdist.shipped.vertexdist_launcher.torchrun_args import nproc_per_node, replica_torchrun_args

OPTIONS = parse_launch_args(["torchrun", "--", "-m", "user.task", "--epochs", "2"])


def cluster_env(cluster: dict[str, list[str]], pool: str, index: int = 0, **extra: str) -> dict[str, str]:
    spec = {"cluster": cluster, "environment": "cloud", "task": {"type": pool, "index": index, "trial": ""}}
    return {"CLUSTER_SPEC": json.dumps(spec), **extra}


def args_of(env: dict[str, str], gpus: int = 0, options: Any = OPTIONS) -> dict[str, str] | None:
    """The torchrun flags as a dict (flag -> value), plus what the workers run under "target"."""
    argv = replica_torchrun_args(env, options, count_gpus=lambda: gpus, free_port=lambda: 40123)
    if argv is None:
        return None
    split = argv.index("--module")
    flags = dict(zip(argv[:split:2], argv[1:split:2], strict=True))
    return {**flags, "target": " ".join(argv[split:])}


def test_one_node_talks_to_itself_on_a_free_port_with_one_process_per_gpu() -> None:
    env = cluster_env({"workerpool0": ["cmle-training-workerpool0-ab-0:2222"]}, "workerpool0")
    assert args_of(env, gpus=4) == {
        "--nnodes": "1",
        "--node-rank": "0",
        "--nproc-per-node": "4",
        "--master-addr": "127.0.0.1",
        "--master-port": "40123",
        "--rdzv-conf": "timeout=600",
        "--max-restarts": "0",
        "target": "--module vertexdist_launcher.worker -m user.task --epochs 2",
    }


def test_no_gpus_means_one_process_and_no_cluster_spec_means_one_node() -> None:
    args = args_of({}, gpus=0)
    assert args is not None
    assert (args["--nnodes"], args["--node-rank"], args["--nproc-per-node"]) == ("1", "0", "1")
    assert (args["--master-addr"], args["--master-port"]) == ("127.0.0.1", "40123")


TWO_NODES = {"workerpool0": ["wp0-0:2222"], "workerpool1": ["wp1-0:2222"]}


def test_two_nodes_meet_at_vertex_master_addr_and_port() -> None:
    master = {"MASTER_ADDR": "wp0-0", "MASTER_PORT": "3333"}
    chief = args_of(cluster_env(TWO_NODES, "workerpool0", **master), gpus=2)
    worker = args_of(cluster_env(TWO_NODES, "workerpool1", 0, **master), gpus=2)
    assert chief is not None and worker is not None
    assert (chief["--nnodes"], chief["--node-rank"], worker["--node-rank"]) == ("2", "0", "1")
    assert {chief["--master-addr"], worker["--master-addr"]} == {"wp0-0"}
    assert {chief["--master-port"], worker["--master-port"]} == {"3333"}


def test_without_master_variables_the_chief_address_of_cluster_spec_is_the_master() -> None:
    worker = args_of(cluster_env(TWO_NODES, "workerpool1"), gpus=1)
    assert worker is not None and (worker["--master-addr"], worker["--master-port"]) == ("wp0-0", "2222")


ONE_PLUS_THREE_WITH_REDUCERS = {
    "workerpool0": ["wp0-0:2222"],
    "workerpool1": ["wp1-0:2222", "wp1-1:2222", "wp1-2:2222"],
    "workerpool2": ["wp2-0:2222", "wp2-1:2222"],
}


@pytest.mark.parametrize(("pool", "index", "rank"), [("workerpool0", 0, "0"), ("workerpool1", 2, "3")])
def test_reduction_servers_are_not_nodes(pool: str, index: int, rank: str) -> None:
    args = args_of(cluster_env(ONE_PLUS_THREE_WITH_REDUCERS, pool, index), gpus=8)
    assert args is not None
    assert (args["--nnodes"], args["--node-rank"], args["--nproc-per-node"]) == ("4", rank, "8")


def test_a_reduction_server_replica_starts_no_torchrun() -> None:
    assert args_of(cluster_env(ONE_PLUS_THREE_WITH_REDUCERS, "workerpool2", 1), gpus=8) is None
    assert placement(cluster_env(ONE_PLUS_THREE_WITH_REDUCERS, "workerpool2", 1)).node_rank is None


def test_an_evaluator_is_no_rank_and_does_not_count_as_a_node() -> None:
    cluster = {**TWO_NODES, "workerpool3": ["wp3-0:2222"]}
    assert args_of(cluster_env(cluster, "workerpool3"), gpus=1) is None
    chief = args_of(cluster_env(cluster, "workerpool0"), gpus=1)
    assert chief is not None and chief["--nnodes"] == "2"


def test_launcher_options_reach_torchrun() -> None:
    options = parse_launch_args(
        ["torchrun", "--nproc-per-node", "3", "--max-restarts", "2", "--", "t.py", "-x"]
    )
    args = args_of({}, gpus=8, options=options)
    assert args is not None
    assert (args["--nproc-per-node"], args["--max-restarts"]) == ("3", "2")
    assert args["target"] == "--module vertexdist_launcher.worker t.py -x"


@pytest.mark.parametrize(
    ("env", "flag", "gpus", "expected"),
    [
        ({}, None, 0, 1),
        ({}, None, 8, 8),
        ({}, 2, 8, 2),
        ({"VERTEXDIST_NPROC_PER_NODE": "3"}, 2, 8, 3),  # a local run's --procs-per-replica wins
        ({"VERTEXDIST_NPROC_PER_NODE": ""}, None, 4, 4),
    ],
)
def test_processes_per_node(env: dict[str, str], flag: int | None, gpus: int, expected: int) -> None:
    argv = ["torchrun", *(["--nproc-per-node", str(flag)] if flag else []), "--", "-m", "m"]
    assert nproc_per_node(parse_launch_args(argv), env, lambda: gpus) == expected


def test_gpus_are_counted_only_when_nothing_says_how_many() -> None:
    def no_counting() -> int:
        raise AssertionError("counted GPUs")

    options = parse_launch_args(["torchrun", "--nproc-per-node", "2", "--", "-m", "m"])
    assert nproc_per_node(options, {}, no_counting) == 2


ONE_CHIEF = {"workerpool0": ["a:1"]}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("not json", "not JSON"),
        ({"cluster": ONE_CHIEF}, "'task' object"),
        ({"cluster": {"pool9": ["a:1"]}, "task": {"type": "pool9"}}, "unknown pool"),
        ({"cluster": ONE_CHIEF, "task": {"type": "workerpool0", "index": 3}}, "index 3"),
        (
            {"cluster": {"workerpool0": ["a"], "workerpool1": ["b:1"]}, "task": {"type": "workerpool1"}},
            "host:port",
        ),
    ],
)
def test_a_bad_cluster_spec_says_what_is_wrong(spec: str | dict[str, Any], message: str) -> None:
    with pytest.raises(ClusterSpecError, match=message):
        placement({"CLUSTER_SPEC": spec if isinstance(spec, str) else json.dumps(spec)})


def test_a_bad_master_port_is_named() -> None:
    with pytest.raises(ClusterSpecError, match="MASTER_PORT='http'"):
        placement(cluster_env(TWO_NODES, "workerpool1", MASTER_PORT="http"))
