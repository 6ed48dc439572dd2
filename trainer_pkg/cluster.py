"""Where this replica sits in the job, read from its environment when asked (never at import).

One small class per launcher, each with `detect()` and `resolve()` (the pattern of Lightning's
`ClusterEnvironment`): torchrun/elastic (ranks already per process), Vertex AI (`CLUSTER_SPEC`, whose
MASTER_*/WORLD_SIZE/RANK count nodes, not processes; see
https://cloud.google.com/vertex-ai/docs/training/distributed-training#cluster-variables) and a single process.

`python -m trainer_pkg.cluster [--nproc-per-node N]` prints what this replica resolved, as one JSON object.
Standard library only, so that this runs in well under a second.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from trainer_pkg.errors import TrainerError

Role = Literal["chief", "worker", "reduction_server", "evaluator"]
Env = Mapping[str, str]

# Vertex's pool order is fixed: 0 primary, 1 workers, 2 parameter/reduction servers, 3 evaluators.
POOL_ROLES: dict[str, Role] = {
    "workerpool0": "chief",
    "workerpool1": "worker",
    "workerpool2": "reduction_server",
    "workerpool3": "evaluator",
}
NPROC_VARIABLE = "VERTEXDIST_NPROC_PER_NODE"
DEFAULT_MASTER_ADDR = "127.0.0.1"


@dataclass(frozen=True)
class NodePlacement:
    """This replica's place in the job, before the number of processes per node is known."""

    environment: str
    role: Role
    node_rank: int | None  # None: not a training node (reduction server, evaluator)
    num_nodes: int
    master_addr: str
    master_port: int | None  # None: a single node picks a free port itself
    # Only under torchrun, which has already started one process per rank:
    process_rank: int | None = None
    local_rank: int | None = None
    launcher_nproc: int | None = None

    @property
    def is_training_node(self) -> bool:
        return self.node_rank is not None


@dataclass(frozen=True)
class ClusterInfo:
    """A placement plus the resolved number of worker processes on this node."""

    placement: NodePlacement
    nproc_per_node: int

    @property
    def world_size(self) -> int | None:
        if not self.placement.is_training_node:
            return None
        return self.placement.num_nodes * self.nproc_per_node

    def global_rank(self, local_rank: int) -> int:
        if self.placement.node_rank is None:
            raise TrainerError(f"a {self.placement.role} replica has no training ranks")
        return self.placement.node_rank * self.nproc_per_node + local_rank

    def as_json(self) -> dict[str, Any]:
        p = self.placement
        return {
            "role": p.role,
            "node_rank": p.node_rank,
            "num_nodes": p.num_nodes,
            "master_addr": p.master_addr,
            "master_port": p.master_port,
            "nproc_per_node": self.nproc_per_node if p.is_training_node else 0,
            "world_size": self.world_size,
        }


def _int_var(env: Env, name: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    raw = env[name]
    try:
        value = int(raw)
    except ValueError:
        raise TrainerError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise TrainerError(f"{name}={raw!r} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise TrainerError(f"{name}={raw!r} must be at most {maximum}")
    return value


def _master_port(env: Env) -> int | None:
    """MASTER_PORT if set; a port out of range would otherwise surface as a TypeError deep inside torch."""
    return _int_var(env, "MASTER_PORT", minimum=1, maximum=65535) if "MASTER_PORT" in env else None


def _split_address(address: object, where: str) -> tuple[str, int]:
    if not isinstance(address, str) or ":" not in address:
        raise TrainerError(f"CLUSTER_SPEC: {where} is {address!r}, expected 'host:port'")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise TrainerError(f"CLUSTER_SPEC: {where} is {address!r}, expected 'host:port'")
    return host, int(port)


class TorchElasticEnvironment:
    """torchrun / torch.distributed.elastic: every process already has its own RANK and LOCAL_RANK."""

    name: ClassVar[str] = "torchrun"
    required: ClassVar[tuple[str, ...]] = (
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "GROUP_RANK",
        "LOCAL_WORLD_SIZE",
    )

    @classmethod
    def detect(cls, env: Env) -> bool:
        # Vertex sets RANK and WORLD_SIZE too, but never LOCAL_RANK or GROUP_RANK.
        return all(name in env for name in cls.required)

    @classmethod
    def resolve(cls, env: Env) -> NodePlacement:
        rank = _int_var(env, "RANK")
        world = _int_var(env, "WORLD_SIZE", minimum=1)
        local_world = _int_var(env, "LOCAL_WORLD_SIZE", minimum=1)
        group_rank = _int_var(env, "GROUP_RANK")
        num_nodes = _int_var(env, "GROUP_WORLD_SIZE", minimum=1) if "GROUP_WORLD_SIZE" in env else None
        return NodePlacement(
            environment=cls.name,
            role="chief" if group_rank == 0 else "worker",
            node_rank=group_rank,
            num_nodes=num_nodes or max(1, world // local_world),
            master_addr=env.get("MASTER_ADDR", DEFAULT_MASTER_ADDR),
            master_port=_master_port(env),
            process_rank=rank,
            local_rank=_int_var(env, "LOCAL_RANK"),
            launcher_nproc=local_world,
        )


class VertexEnvironment:
    """Vertex AI custom training: `CLUSTER_SPEC` names the pools; pools 0 and 1 are the training nodes."""

    name: ClassVar[str] = "vertex"

    @classmethod
    def detect(cls, env: Env) -> bool:
        return "CLUSTER_SPEC" in env

    @classmethod
    def resolve(cls, env: Env) -> NodePlacement:
        spec = cls._parse(env["CLUSTER_SPEC"])
        cluster: dict[str, list[str]] = spec["cluster"]
        task_type, index = spec["task"]["type"], spec["task"]["index"]
        for pool, addresses in cluster.items():
            for i, address in enumerate(addresses):
                _split_address(address, f"cluster.{pool}[{i}]")
        chiefs = cluster.get("workerpool0", [])
        if len(chiefs) != 1:
            raise TrainerError(
                "CLUSTER_SPEC: cluster.workerpool0 must list exactly one replica (the chief), "
                f"got {len(chiefs)}"
            )
        num_nodes = 1 + len(cluster.get("workerpool1", []))
        role = POOL_ROLES[task_type]
        node_rank = {"workerpool0": 0, "workerpool1": 1 + index}.get(task_type)
        if num_nodes == 1:
            # One node talks only to itself: loopback and a free port, unless told otherwise.
            master_addr = env.get("MASTER_ADDR", DEFAULT_MASTER_ADDR)
            master_port = _master_port(env)
        else:
            chief_host, chief_port = _split_address(chiefs[0], "cluster.workerpool0[0]")
            master_addr = env.get("MASTER_ADDR") or chief_host
            master_port = _master_port(env) or chief_port
        return NodePlacement(
            environment=cls.name,
            role=role,
            node_rank=node_rank,
            num_nodes=num_nodes,
            master_addr=master_addr,
            master_port=master_port,
        )

    @staticmethod
    def _parse(raw: str) -> dict[str, Any]:
        """Check the parts we use; `job` is ignored (often a JSON string in practice), `trial` may be ''."""
        try:
            spec = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise TrainerError(f"CLUSTER_SPEC is not valid JSON: {exc}") from None
        if not isinstance(spec, dict):
            raise TrainerError(f"CLUSTER_SPEC must be a JSON object, got {type(spec).__name__}")
        cluster = spec.get("cluster")
        if not isinstance(cluster, dict) or not cluster:
            raise TrainerError(
                "CLUSTER_SPEC: 'cluster' must be an object mapping pool names to address lists"
            )
        for pool, addresses in cluster.items():
            if pool not in POOL_ROLES:
                raise TrainerError(
                    f"CLUSTER_SPEC: unknown pool {pool!r} in 'cluster' (expected {', '.join(POOL_ROLES)})"
                )
            if not isinstance(addresses, list):
                raise TrainerError(f"CLUSTER_SPEC: cluster.{pool} must be a list of 'host:port' strings")
        task = spec.get("task")
        if not isinstance(task, dict):
            raise TrainerError("CLUSTER_SPEC: 'task' must be an object with 'type' and 'index'")
        task_type = task.get("type")
        if task_type not in cluster:
            raise TrainerError(
                f"CLUSTER_SPEC: task.type {task_type!r} is not a pool in 'cluster' "
                f"({', '.join(sorted(cluster))})"
            )
        index = task.get("index", 0)
        if isinstance(index, str) and index.isdigit():
            index = int(index)
        if not isinstance(index, int) or isinstance(index, bool):
            raise TrainerError(f"CLUSTER_SPEC: task.index {index!r} is not an integer")
        size = len(cluster[task_type])
        if not 0 <= index < size:
            raise TrainerError(
                f"CLUSTER_SPEC: task.index {index} is out of range for {task_type} ({size} replica(s))"
            )
        return {"cluster": cluster, "task": {"type": task_type, "index": index}}


class SingleProcessEnvironment:
    """Nothing set: one node, talking to itself."""

    name: ClassVar[str] = "single"

    @classmethod
    def detect(cls, env: Env) -> bool:
        return True

    @classmethod
    def resolve(cls, env: Env) -> NodePlacement:
        return NodePlacement(
            environment=cls.name,
            role="chief",
            node_rank=0,
            num_nodes=1,
            master_addr=env.get("MASTER_ADDR", DEFAULT_MASTER_ADDR),
            master_port=_master_port(env),
        )


ENVIRONMENTS = (TorchElasticEnvironment, VertexEnvironment, SingleProcessEnvironment)


def detect_placement(env: Env | None = None) -> NodePlacement:
    """The first environment that recognises `env` (default: os.environ) says where this replica sits."""
    env = os.environ if env is None else env
    for environment in ENVIRONMENTS:
        if environment.detect(env):
            return environment.resolve(env)
    raise AssertionError("SingleProcessEnvironment always detects")  # pragma: no cover


def visible_gpu_count(env: Env | None = None) -> int:
    """GPUs this replica may use, without importing torch (which costs over a second)."""
    env = os.environ if env is None else env
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        # CUDA stops at the first invalid entry (empty or negative; "-1" is the usual way to hide all). The
        # launcher's rule (vertexdist_launcher.gpus.visible_devices), which the trainer cannot import: a test
        # keeps the two in agreement.
        count = 0
        for entry in visible.split(","):
            if not entry.strip() or entry.strip().startswith("-"):
                break
            count += 1
        return count
    gpus = Path("/proc/driver/nvidia/gpus")
    if gpus.is_dir():
        return sum(1 for _ in gpus.iterdir())
    # Containers may lack /proc/driver/nvidia but get one /dev/nvidiaN node per GPU they were given.
    return sum(1 for node in Path("/dev").glob("nvidia*") if node.name[len("nvidia") :].isdigit())


def resolve_nproc(flag: int | None, placement: NodePlacement, env: Env | None = None) -> int:
    """Workers per node: torchrun's, else the flag, else VERTEXDIST_NPROC_PER_NODE, else GPUs, else 1."""
    env = os.environ if env is None else env
    if placement.launcher_nproc is not None:
        return placement.launcher_nproc
    if flag is not None:
        if flag < 1:
            raise TrainerError(f"--nproc-per-node must be at least 1, got {flag}")
        return flag
    if env.get(NPROC_VARIABLE):
        return _int_var(env, NPROC_VARIABLE, minimum=1)
    return visible_gpu_count(env) or 1


def detect_cluster(nproc_flag: int | None = None, env: Env | None = None) -> ClusterInfo:
    placement = detect_placement(env)
    return ClusterInfo(placement=placement, nproc_per_node=resolve_nproc(nproc_flag, placement, env))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer_pkg.cluster", description="Print this replica's place in the job as JSON."
    )
    parser.add_argument("--nproc-per-node", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        info = detect_cluster(args.nproc_per_node)
    except TrainerError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    print(json.dumps(info.as_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
