"""One replica's Ray node: what it is, `ray start`'s arguments for it, and the environments. Pure.

The primary replica (node 0) is the Ray head: its GCS listens on the cluster's master port (Vertex's
MASTER_PORT, or workerpool0's port in CLUSTER_SPEC), every other training replica joins it with
`ray start --address HEAD:PORT`. Each node advertises the CPUs and GPUs it was given; `--block` keeps
`ray start` in the foreground as the parent of every Ray process of the node, so the node lives and dies
with the replica's launcher.

Where the whole job shares one machine (the master address is a loopback address: vertexdist's local
runs, a single-replica job) each node gets a loopback address of its own, 127.0.0.(2 + node rank): Ray
rewrites 127.0.0.1 to the machine's network address, and Ray Train tells nodes apart by address. Every
port but the head's is then one the kernel picks (or a free one, where Ray insists on a number), so two
jobs never collide. Where vertexdist runs the job locally (VERTEXDIST_NPROC_PER_NODE is set) a node
also gets a share of the machine: a few CPUs, a small object store, its own temp folder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .cluster import Placement
from .torchrun_args import NPROC_VARIABLE

# `python -m ray.scripts.scripts` is the `ray` command, from the interpreter that runs the driver.
RAY_START = ("-m", "ray.scripts.scripts", "start")
RAY_REQUIREMENT = "ray[train,tune]"
RAY_TESTED = "ray[train,tune]==2.60.0"  # the Ray vertexdist's tests run (its `ray` extra pins the same)
LOCAL_MIN_CPUS = 2  # one Ray Train worker and the Ray Data tasks that feed it
LOCAL_OBJECT_STORE_BYTES = 150 * 1000 * 1000
MAX_LOOPBACK_NODES = 250  # 127.0.0.2 .. 127.0.0.251
DASHBOARD_VARIABLE = "VERTEXDIST_RAY_DASHBOARD"  # "1" (trainer.env) runs Ray's dashboard on the head

# For every Ray process of a node; a value the replica already has (trainer.env) wins.
NODE_DEFAULTS = {
    # Ray puts each worker process in a process group of its own; in the replica's group, stopping the
    # replica (its process group) stops them too.
    "RAY_process_group_cleanup_enabled": "0",
    # On SIGTERM a node waits up to 30 s for its tasks to drain; it is stopped only once the driver has
    # ended, so there is nothing left to wait for.
    "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    # Ray Train's workers replace `print` with one that logs the line and, because Ray's workers replace
    # sys.stdout, prints it too (ray.train.v2 patch_print): each line of the user's came out twice.
    "RAY_TRAIN_ENABLE_PRINT_PATCH": "0",
    # Ray Data's tqdm bars are redrawn in place on a terminal; in a replica's log (and Cloud Logging) every
    # redraw is a line. Ray Data still says when each dataset starts and ends.
    "RAY_DATA_DISABLE_PROGRESS_BARS": "1",
}
# For the driver: every worker's lines in the log as printed (Ray folds lines that differ only in numbers),
# with their `(Worker pid=...)` prefix in plain text, not in colour codes (a log is no terminal).
DRIVER_DEFAULTS = {"RAY_DEDUP_LOGS": "0", "RAY_COLOR_PREFIX": "0"}


@dataclass(frozen=True)
class RayNode:
    """One replica's Ray node."""

    replica: str
    node_rank: int
    nnodes: int
    head_host: str  # where the head's GCS is reached
    port: int  # the head's GCS port
    node_ip: str | None  # None: Ray finds this machine's address
    num_cpus: int
    num_gpus: int
    one_machine: bool  # every node of the job is on this machine
    local_share: bool  # vertexdist runs the job here: this node gets a share of the machine
    dashboard: bool

    @property
    def is_head(self) -> bool:
        return self.node_rank == 0

    @property
    def head_address(self) -> str:
        return f"{self.head_host}:{self.port}"

    @property
    def role(self) -> str:
        return "the Ray head" if self.is_head else "a Ray worker node"


def is_loopback(host: str) -> bool:
    return host == "localhost" or host == "::1" or host.startswith("127.")


def loopback_node_ip(node_rank: int) -> str:
    if not 0 <= node_rank < MAX_LOOPBACK_NODES:
        raise ValueError(f"node {node_rank}: at most {MAX_LOOPBACK_NODES} Ray nodes share one machine")
    return f"127.0.0.{2 + node_rank}"


def local_cpus(env: Mapping[str, str]) -> int | None:
    """The CPUs a node of a local run advertises: the replica's processes (`--procs-per-replica`, else the
    template's GPUs), at least LOCAL_MIN_CPUS; None outside vertexdist's local runs."""
    raw = env.get(NPROC_VARIABLE, "")
    if not raw.isdigit():
        return None
    return max(LOCAL_MIN_CPUS, int(raw))


def ray_node(place: Placement, env: Mapping[str, str], *, cpus: int, gpus: int, port: int) -> RayNode:
    """This replica's node; `cpus` and `gpus` are the machine's, `port` the head's GCS port."""
    if place.node_rank is None:
        raise ValueError(f"{place.replica} is a {place.role}, not a training node")
    one_machine = is_loopback(place.master_addr)
    share = local_cpus(env)
    return RayNode(
        replica=place.replica,
        node_rank=place.node_rank,
        nnodes=place.nnodes,
        head_host=loopback_node_ip(0) if one_machine else place.master_addr,
        port=port,
        node_ip=loopback_node_ip(place.node_rank) if one_machine else None,
        num_cpus=share if share is not None else max(1, cpus),
        num_gpus=gpus,
        one_machine=one_machine,
        local_share=share is not None,
        dashboard=env.get(DASHBOARD_VARIABLE, "") not in ("", "0"),
    )


def ray_start_args(node: RayNode, *, free_port: Callable[[], int], temp_dir: str | None = None) -> list[str]:
    """The arguments after `python -m ray.scripts.scripts start` for `node`."""
    args = ["--head", "--port", str(node.port)] if node.is_head else ["--address", node.head_address]
    if node.node_ip is not None:
        args += ["--node-ip-address", node.node_ip]
    args += ["--num-cpus", str(node.num_cpus), "--num-gpus", str(node.num_gpus)]
    if node.local_share:
        args += ["--object-store-memory", str(LOCAL_OBJECT_STORE_BYTES)]
    if node.is_head:
        args += ["--include-dashboard", "true" if node.dashboard else "false"]
    if node.one_machine:
        # Ray's fixed default ports (10001, 8265, 52365, 10002-19999) would collide between nodes.
        args += ["--min-worker-port", "0", "--max-worker-port", "0", "--dashboard-agent-listen-port", "0"]
        if node.is_head:
            dashboard_port = free_port() if node.dashboard else 0
            args += ["--dashboard-port", str(dashboard_port), "--ray-client-server-port", str(free_port())]
    if temp_dir is not None:
        args += ["--temp-dir", temp_dir]
    return [*args, "--disable-usage-stats", "--block"]


def node_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment of `ray start` and so of every Ray process of the node."""
    return {**NODE_DEFAULTS, **env}


def driver_env(env: Mapping[str, str], node: RayNode) -> dict[str, str]:
    """The driver's environment: `ray.init()` / `ray.init(address="auto")` find the cluster by RAY_ADDRESS."""
    return {**NODE_DEFAULTS, **DRIVER_DEFAULTS, **env, "RAY_ADDRESS": node.head_address}
