"""The ray mode's pure parts for every cluster shape: each replica's Ray node and `ray start` arguments,
the driver's environment, and what a worker node does with what it sees of the head."""

from __future__ import annotations

import json

import pytest

from vertexdist.shipped.vertexdist_launcher.cluster import placement
from vertexdist.shipped.vertexdist_launcher.ray_args import (
    LOCAL_OBJECT_STORE_BYTES,
    RayNode,
    driver_env,
    loopback_node_ip,
    node_env,
    ray_node,
    ray_start_args,
)
from vertexdist.shipped.vertexdist_launcher.ray_outcome import (
    HEAD_LOST_S,
    Outcome,
    driver_failure_lines,
    worker_verdict,
)

TWO_NODES = {"workerpool0": ["wp0-0:2222"], "workerpool1": ["wp1-0:2222"]}
LOCAL_TWO = {"workerpool0": ["127.0.0.1:41000"], "workerpool1": ["127.0.0.1:41001"]}
ONE_PLUS_THREE_WITH_REDUCERS = {
    "workerpool0": ["wp0-0:2222"],
    "workerpool1": ["wp1-0:2222", "wp1-1:2222", "wp1-2:2222"],
    "workerpool2": ["wp2-0:2222", "wp2-1:2222"],
}


def cluster_env(cluster: dict[str, list[str]], pool: str, index: int = 0, **extra: str) -> dict[str, str]:
    spec = {"cluster": cluster, "environment": "cloud", "task": {"type": pool, "index": index, "trial": ""}}
    return {"CLUSTER_SPEC": json.dumps(spec), **extra}


def node_of(env: dict[str, str], *, cpus: int = 24, gpus: int = 0, port: int = 40123) -> RayNode:
    place = placement(env)
    return ray_node(place, env, cpus=cpus, gpus=gpus, port=place.master_port or port)


def flags(args: list[str]) -> dict[str, str]:
    """`ray start` arguments as flag -> value ("" for a flag without one)."""
    found: dict[str, str] = {}
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else ""
            found[arg] = value
    return found


def start_flags(node: RayNode, temp_dir: str | None = None) -> dict[str, str]:
    ports = iter([45001, 45002, 45003])
    return flags(ray_start_args(node, free_port=lambda: next(ports), temp_dir=temp_dir))


def test_on_vertex_the_head_listens_on_the_master_port_and_advertises_the_machine() -> None:
    master = {"MASTER_ADDR": "wp0-0", "MASTER_PORT": "3333"}
    head = node_of(cluster_env(TWO_NODES, "workerpool0", **master), cpus=24, gpus=2)
    assert (head.is_head, head.node_rank, head.nnodes, head.head_address) == (True, 0, 2, "wp0-0:3333")
    assert start_flags(head) == {
        "--head": "",
        "--port": "3333",
        "--num-cpus": "24",
        "--num-gpus": "2",
        "--include-dashboard": "false",
        "--disable-usage-stats": "",
        "--block": "",
    }


def test_on_vertex_a_worker_joins_the_head_and_ray_finds_its_own_address() -> None:
    master = {"MASTER_ADDR": "wp0-0", "MASTER_PORT": "3333"}
    worker = node_of(cluster_env(TWO_NODES, "workerpool1", 0, **master), cpus=24, gpus=2)
    args = start_flags(worker)
    assert args["--address"] == "wp0-0:3333" and "--head" not in args
    assert "--node-ip-address" not in args and "--temp-dir" not in args
    assert (args["--num-cpus"], args["--num-gpus"]) == ("24", "2")
    assert "--include-dashboard" not in args  # only a head runs one


def test_without_master_variables_the_chief_of_cluster_spec_is_the_head() -> None:
    worker = node_of(cluster_env(TWO_NODES, "workerpool1"))
    assert worker.head_address == "wp0-0:2222"


def test_locally_every_node_has_a_loopback_address_a_cpu_share_and_kernel_picked_ports() -> None:
    local = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "41000", "VERTEXDIST_NPROC_PER_NODE": "1"}
    head = node_of(cluster_env(LOCAL_TWO, "workerpool0", **local), cpus=2)
    worker = node_of(cluster_env(LOCAL_TWO, "workerpool1", **local), cpus=2)
    # Ray turns 127.0.0.1 into the machine's network address; 127.0.0.2 and up it keeps.
    assert (head.node_ip, worker.node_ip) == ("127.0.0.2", "127.0.0.3")
    assert head.head_address == worker.head_address == "127.0.0.2:41000"
    head_args = start_flags(head, temp_dir="/tmp/vxray/abc")
    assert head_args == {
        "--head": "",
        "--port": "41000",
        "--node-ip-address": "127.0.0.2",
        "--num-cpus": "2",
        "--num-gpus": "0",
        "--object-store-memory": str(LOCAL_OBJECT_STORE_BYTES),
        "--include-dashboard": "false",
        "--min-worker-port": "0",
        "--max-worker-port": "0",
        "--dashboard-agent-listen-port": "0",
        "--dashboard-port": "0",
        "--ray-client-server-port": "45001",  # Ray takes no 0 here: a free port
        "--temp-dir": "/tmp/vxray/abc",
        "--disable-usage-stats": "",
        "--block": "",
    }
    worker_args = start_flags(worker)
    assert worker_args["--address"] == "127.0.0.2:41000"
    assert worker_args["--node-ip-address"] == "127.0.0.3"
    assert "--ray-client-server-port" not in worker_args and "--dashboard-port" not in worker_args
    assert (worker_args["--min-worker-port"], worker_args["--dashboard-agent-listen-port"]) == ("0", "0")


@pytest.mark.parametrize(("procs", "cpus"), [("1", "2"), ("2", "2"), ("4", "4"), ("8", "8")])
def test_a_local_node_advertises_the_replicas_processes_and_at_least_two_cpus(procs: str, cpus: str) -> None:
    env = cluster_env(LOCAL_TWO, "workerpool1", VERTEXDIST_NPROC_PER_NODE=procs)
    assert start_flags(node_of(env, cpus=64))["--num-cpus"] == cpus


def test_a_single_replica_job_is_a_head_alone_on_a_free_port() -> None:
    env = cluster_env({"workerpool0": ["cmle-training-workerpool0-ab-0:2222"]}, "workerpool0")
    head = node_of(env, cpus=8, gpus=1, port=40123)
    assert (head.is_head, head.nnodes, head.head_address) == (True, 1, "127.0.0.2:40123")
    args = start_flags(head)
    # Not a local run: the machine's CPUs and Ray's own object store size, Ray's own temp folder.
    assert (args["--num-cpus"], args["--num-gpus"]) == ("8", "1")
    assert "--object-store-memory" not in args and "--temp-dir" not in args


def test_without_cluster_spec_the_launcher_is_a_one_node_cluster() -> None:
    head = node_of({}, cpus=4)
    assert (head.is_head, head.nnodes, head.node_ip) == (True, 1, "127.0.0.2")


def test_containers_of_a_local_docker_run_find_each_other_by_host_name() -> None:
    # `local-run --docker`: a local run (a CPU share, a small object store) but separate hosts.
    env = cluster_env(
        {"workerpool0": ["workerpool0-0:2222"], "workerpool1": ["workerpool1-0:2222"]},
        "workerpool1",
        MASTER_ADDR="workerpool0-0",
        MASTER_PORT="2222",
        VERTEXDIST_NPROC_PER_NODE="1",
    )
    args = start_flags(node_of(env))
    assert args["--address"] == "workerpool0-0:2222" and "--node-ip-address" not in args
    assert args["--object-store-memory"] == str(LOCAL_OBJECT_STORE_BYTES) and args["--num-cpus"] == "2"
    assert "--min-worker-port" not in args  # each container has ports of its own


@pytest.mark.parametrize(("pool", "index", "rank"), [("workerpool0", 0, 0), ("workerpool1", 2, 3)])
def test_reduction_servers_are_no_ray_nodes(pool: str, index: int, rank: int) -> None:
    node = node_of(cluster_env(ONE_PLUS_THREE_WITH_REDUCERS, pool, index))
    assert (node.node_rank, node.nnodes) == (rank, 4)


@pytest.mark.parametrize("pool", ["workerpool2", "workerpool3"])
def test_a_replica_that_is_no_training_node_gets_no_ray_node(pool: str) -> None:
    cluster = {"workerpool0": ["wp0:2222"], "workerpool1": ["wp1:2222"], pool: ["other:2222"]}
    env = cluster_env(cluster, pool)
    with pytest.raises(ValueError, match="not a training node"):
        node_of(env)


def test_the_dashboard_runs_on_the_head_only_when_asked() -> None:
    asked = {"VERTEXDIST_RAY_DASHBOARD": "1", "VERTEXDIST_NPROC_PER_NODE": "1"}
    head = node_of(cluster_env(LOCAL_TWO, "workerpool0", **asked))
    args = start_flags(head)
    assert args["--include-dashboard"] == "true"
    assert args["--dashboard-port"] == "45001"  # a free port, printed with the command line
    vertex_head = node_of(cluster_env(TWO_NODES, "workerpool0", VERTEXDIST_RAY_DASHBOARD="1"))
    assert start_flags(vertex_head)["--include-dashboard"] == "true"


def test_loopback_addresses_run_out_after_250_nodes() -> None:
    assert loopback_node_ip(249) == "127.0.0.251"
    with pytest.raises(ValueError, match="at most 250"):
        loopback_node_ip(250)


def test_the_nodes_and_the_driver_get_ray_settings_the_user_can_override() -> None:
    env = {"AIP_MODEL_DIR": "gs://b/m", "RAY_DEDUP_LOGS": "1"}
    head = node_of(cluster_env(LOCAL_TWO, "workerpool0", MASTER_PORT="41000"))
    nodes = node_env(env)
    assert nodes["RAY_process_group_cleanup_enabled"] == "0"  # Ray's workers stay in the replica's group
    assert nodes["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] == "0"
    assert nodes["AIP_MODEL_DIR"] == "gs://b/m"
    driver = driver_env(env, head)
    assert driver["RAY_ADDRESS"] == "127.0.0.2:41000"
    assert driver["RAY_DEDUP_LOGS"] == "1"  # the user's value wins over the launcher's default
    assert driver_env({}, head)["RAY_DEDUP_LOGS"] == "0"


# --- the driver's outcome, as the worker nodes read it -----------------------------------------------


def test_an_outcome_reads_back_and_garbage_is_never_a_success() -> None:
    outcome = Outcome(1, "ValueError: bad batch 7", "workerpool0-0")
    assert Outcome.decode(outcome.encode()) == outcome
    assert Outcome.decode(Outcome(0).encode()).succeeded
    for raw in (b"", b"{", b'{"exit_code": "x", "replica": "r"}', b"[]", b'{"replica": "r"}'):
        assert not Outcome.decode(raw).succeeded


def verdict(**seen: object) -> tuple[str, str]:
    defaults: dict[str, object] = {"node_exit": None, "outcome": None, "head_unreachable_s": None}
    result = worker_verdict("workerpool1-0", head="127.0.0.2:41000", **{**defaults, **seen})  # type: ignore[arg-type]
    return result.action, result.line


def test_a_worker_succeeds_only_after_reading_a_successful_outcome() -> None:
    assert verdict()[0] == "wait"
    assert verdict(outcome=Outcome(0))[0] == "succeed"
    # Its node stopping once the head has ended the cluster does not undo the head's success.
    assert verdict(outcome=Outcome(0), node_exit=1)[0] == "succeed"


def test_a_worker_fails_with_the_drivers_error_when_the_driver_failed() -> None:
    action, line = verdict(outcome=Outcome(3, "RuntimeError: no GPU", "workerpool0-0"))
    assert action == "fail"
    assert line == (
        "workerpool1-0 failed: the Ray driver on workerpool0-0 exited with status 3: RuntimeError: no GPU"
    )


def test_a_worker_whose_node_stopped_fails_and_says_so() -> None:
    action, line = verdict(node_exit=-9)
    assert action == "fail" and "its Ray node stopped: `ray start` was killed by SIGKILL" in line


def test_a_head_gone_without_an_outcome_fails_the_worker_after_a_while_not_at_once() -> None:
    assert verdict(head_unreachable_s=HEAD_LOST_S / 2)[0] == "wait"
    action, line = verdict(head_unreachable_s=HEAD_LOST_S)
    assert action == "fail" and "left no driver outcome" in line


def test_the_heads_last_lines_name_the_drivers_error_then_how_it_ended() -> None:
    outcome = Outcome(1, "ValueError: bad batch 7", "workerpool0-0")
    assert driver_failure_lines("workerpool0-0", outcome, "python -m task", 42) == [
        "workerpool0-0: the Ray driver: ValueError: bad batch 7",
        "workerpool0-0 failed: the Ray driver `python -m task` exited with status 1 (pid 42)",
    ]
    assert driver_failure_lines("workerpool0-0", Outcome(-15), "python x.py", 7) == [
        "workerpool0-0 failed: the Ray driver `python x.py` was killed by SIGTERM (pid 7)"
    ]
