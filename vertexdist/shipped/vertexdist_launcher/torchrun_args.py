"""torch.distributed.run's arguments for one replica, from its placement and the launcher's options. Pure.

A static rendezvous at the primary replica (Vertex's MASTER_ADDR/MASTER_PORT, or workerpool0's address),
`--nnodes` the training nodes of CLUSTER_SPEC, `--node-rank` this node's index, the template's rendezvous
timeout as the rendezvous's join timeout (`--rdzv-conf timeout=N`), and each local rank running
the user's module through `vertexdist_launcher.worker`, which ties the process's life to the launcher's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .cluster import Placement, placement
from .options import LaunchOptions
from .timeouts import DEFAULT_RENDEZVOUS_TIMEOUT_S, rendezvous_timeout_s

# Set by vertexdist's local runs (from `--procs-per-replica`, else the template's processes per node).
NPROC_VARIABLE = "VERTEXDIST_NPROC_PER_NODE"
WORKER_MODULE = "vertexdist_launcher.worker"


def nproc_per_node(options: LaunchOptions, env: Mapping[str, str], count_gpus: Callable[[], int]) -> int:
    """VERTEXDIST_NPROC_PER_NODE, else `--nproc-per-node`, else this machine's GPUs, else 1."""
    raw = env.get(NPROC_VARIABLE, "")
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    if options.nproc_per_node is not None:
        return options.nproc_per_node
    return max(1, count_gpus())


def torchrun_args(
    place: Placement,
    options: LaunchOptions,
    *,
    nproc: int,
    master_port: int,
    rdzv_timeout_s: int = DEFAULT_RENDEZVOUS_TIMEOUT_S,
) -> list[str]:
    """The arguments after `python -m torch.distributed.run` for a training node."""
    if place.node_rank is None:
        raise ValueError(f"{place.replica} is a {place.role}, not a training node")
    return [
        "--nnodes",
        str(place.nnodes),
        "--node-rank",
        str(place.node_rank),
        "--nproc-per-node",
        str(nproc),
        "--master-addr",
        place.master_addr,
        "--master-port",
        str(master_port),
        "--rdzv-conf",
        f"timeout={rdzv_timeout_s}",
        "--max-restarts",
        str(options.max_restarts),
        "--module",
        WORKER_MODULE,
        *options.target.argv(),
    ]


def replica_torchrun_args(
    env: Mapping[str, str],
    options: LaunchOptions,
    *,
    count_gpus: Callable[[], int],
    free_port: Callable[[], int],
) -> list[str] | None:
    """This replica's torchrun arguments from its environment; None where it is not a training node."""
    place = placement(env)
    if not place.is_training:
        return None
    port = place.master_port if place.master_port is not None else free_port()
    nproc = nproc_per_node(options, env, count_gpus)
    return torchrun_args(
        place, options, nproc=nproc, master_port=port, rdzv_timeout_s=rendezvous_timeout_s(env)
    )
