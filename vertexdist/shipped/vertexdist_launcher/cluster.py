"""Where this replica sits in the job, read from Vertex's `CLUSTER_SPEC`. Pure.

https://cloud.google.com/vertex-ai/docs/training/distributed-training#cluster-variables: every replica gets
`{"cluster": {"workerpool0": ["host:port"], ...}, "task": {"type": "workerpool1", "index": 0}, ...}`.
Only pools 0 and 1 are training nodes (workerpool0 is node 0, workerpool1 index i is node 1 + i); pool 2
(reduction or parameter servers) and pool 3 (evaluators) are not ranks. Vertex also sets MASTER_ADDR and
MASTER_PORT on multi-replica jobs, and they win over the chief's CLUSTER_SPEC address; a single-replica job
has neither and talks only to itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

POOLS = ("workerpool0", "workerpool1", "workerpool2", "workerpool3")
POOL_ROLES = {
    "workerpool0": "primary replica",
    "workerpool1": "worker",
    "workerpool2": "reduction or parameter server",
    "workerpool3": "evaluator",
}
LOOPBACK = "127.0.0.1"


class ClusterSpecError(ValueError):
    """CLUSTER_SPEC (or MASTER_ADDR/MASTER_PORT) is not what Vertex sets."""


@dataclass(frozen=True)
class Placement:
    """This replica's place: its name, node rank (None: not a training node) and the training cluster."""

    pool: str
    index: int
    node_rank: int | None
    nnodes: int
    master_addr: str
    master_port: int | None  # None on a single node: the launcher picks a free local port

    @property
    def replica(self) -> str:
        return f"{self.pool}-{self.index}"

    @property
    def is_training(self) -> bool:
        return self.node_rank is not None

    @property
    def role(self) -> str:
        return POOL_ROLES[self.pool]


def _address(value: Any, where: str) -> tuple[str, int]:
    if isinstance(value, str) and ":" in value:
        host, _, port = value.rpartition(":")
        if host and port.isdigit() and 0 < int(port) < 65536:
            return host, int(port)
    raise ClusterSpecError(f"CLUSTER_SPEC: {where} is {value!r}, expected 'host:port'")


def _port(env: Mapping[str, str]) -> int | None:
    raw = env.get("MASTER_PORT")
    if not raw:
        return None
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ClusterSpecError(f"MASTER_PORT={raw!r} is not a port number (1..65535)")
    return int(raw)


def _parse(raw: str) -> tuple[dict[str, list[str]], str, int]:
    try:
        spec = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ClusterSpecError(f"CLUSTER_SPEC is not JSON: {exc}") from None
    cluster = spec.get("cluster") if isinstance(spec, dict) else None
    task = spec.get("task") if isinstance(spec, dict) else None
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise ClusterSpecError("CLUSTER_SPEC needs a 'cluster' object and a 'task' object")
    for pool, addresses in cluster.items():
        if pool not in POOLS:
            raise ClusterSpecError(f"CLUSTER_SPEC: unknown pool {pool!r} (expected {', '.join(POOLS)})")
        if not isinstance(addresses, list):
            raise ClusterSpecError(f"CLUSTER_SPEC: cluster.{pool} must be a list of 'host:port'")
    pool = task.get("type")
    index = task.get("index", 0)
    if isinstance(index, str) and index.isdigit():
        index = int(index)
    if pool not in cluster:
        raise ClusterSpecError(f"CLUSTER_SPEC: task.type {pool!r} is not a pool of the cluster")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(cluster[pool]):
        raise ClusterSpecError(f"CLUSTER_SPEC: task.index {index!r} is not a replica of {pool}")
    return cluster, str(pool), index


def placement(env: Mapping[str, str]) -> Placement:
    """This replica's placement; without CLUSTER_SPEC (run by hand) a single node."""
    raw = env.get("CLUSTER_SPEC")
    if not raw:
        return Placement("workerpool0", 0, 0, 1, LOOPBACK, None)
    cluster, pool, index = _parse(raw)
    chiefs = cluster.get("workerpool0", [])
    if len(chiefs) != 1:
        raise ClusterSpecError(f"CLUSTER_SPEC: workerpool0 must list one replica, got {len(chiefs)}")
    nnodes = len(chiefs) + len(cluster.get("workerpool1", []))
    node_rank = {"workerpool0": 0, "workerpool1": 1 + index}.get(pool)
    if nnodes == 1:
        return Placement(pool, index, node_rank, 1, LOOPBACK, None)
    chief_host, chief_port = _address(chiefs[0], "cluster.workerpool0[0]")
    return Placement(
        pool,
        index,
        node_rank,
        nnodes,
        env.get("MASTER_ADDR") or chief_host,
        _port(env) or chief_port,
    )
