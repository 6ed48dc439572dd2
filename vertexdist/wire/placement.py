"""Does a job fit a persistent resource? One rule for the emulator (refusing a CustomJob) and the CLI (before
a submit, after a template's pools are rendered).

Vertex runs a job on a persistent resource only on machines the resource reserved: each of the job's worker
pools must have the machine shape of one of the resource's pools (machine type, accelerator type and count)
and ask for no more replicas than that pool holds
(https://cloud.google.com/vertex-ai/docs/training/persistent-resource-train). Pure: dicts in proto-JSON
(camelCase, enum names), strings out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

NO_ACCELERATOR = "ACCELERATOR_TYPE_UNSPECIFIED"


def machine_shape(machine: Mapping[str, Any]) -> tuple[str, str, int]:
    """(machine type, accelerator type, accelerator count) with Vertex's defaults filled in."""
    accelerator = str(machine.get("acceleratorType") or NO_ACCELERATOR)
    count = int(machine.get("acceleratorCount") or 0) if accelerator != NO_ACCELERATOR else 0
    return str(machine.get("machineType") or ""), accelerator, count


def describe_shape(shape: tuple[str, str, int]) -> str:
    machine, accelerator, count = shape
    return machine if accelerator == NO_ACCELERATOR else f"{machine} with {count} x {accelerator}"


def _replicas(pool: Mapping[str, Any]) -> int:
    autoscaling = pool.get("autoscalingSpec")
    if isinstance(autoscaling, Mapping) and autoscaling.get("maxReplicaCount"):
        return int(autoscaling["maxReplicaCount"])
    return int(pool.get("replicaCount") or 0)


def placement_problems(job_spec: Mapping[str, Any], resource: Mapping[str, Any]) -> list[str]:
    """Why `job_spec` (a CustomJobSpec) cannot run on `resource` (a PersistentResource); [] when it fits."""
    name = str(resource.get("name", "")).rsplit("/", 1)[-1] or "the persistent resource"
    pools: Sequence[Mapping[str, Any]] = resource.get("resourcePools") or []
    capacity: dict[tuple[str, str, int], int] = {}
    for pool in pools:
        shape = machine_shape(pool.get("machineSpec") or {})
        capacity[shape] = capacity.get(shape, 0) + _replicas(pool)
    wanted: dict[tuple[str, str, int], list[int]] = {}
    for index, pool in enumerate(job_spec.get("workerPoolSpecs") or []):
        if not pool or not int(pool.get("replicaCount") or 0):
            continue  # an empty placeholder pool (e.g. no workers after the chief) asks for nothing
        shape = machine_shape(pool.get("machineSpec") or {})
        wanted.setdefault(shape, []).append(index)
        if shape not in capacity:
            offered = ", ".join(describe_shape(s) for s in capacity) or "none"
            return [
                f"workerPoolSpecs[{index}] asks for {describe_shape(shape)}, which persistent resource "
                f"{name!r} has no pool of (its pools: {offered})"
            ]
    problems = []
    for shape, indices in wanted.items():
        asked = sum(int(job_spec["workerPoolSpecs"][i].get("replicaCount") or 0) for i in indices)
        if asked > capacity[shape]:
            pools_named = ", ".join(f"workerPoolSpecs[{i}]" for i in indices)
            problems.append(
                f"{pools_named} ask for {asked} replicas of {describe_shape(shape)}; persistent resource "
                f"{name!r} holds {capacity[shape]}"
            )
    return problems


def pools_for(job_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The resource pools a persistent resource needs to run `job_spec` (proto-JSON ResourcePools): one per
    machine shape, holding every replica of that shape, with the first such pool's disk."""
    pools: dict[tuple[str, str, int], dict[str, Any]] = {}
    for pool in job_spec.get("workerPoolSpecs") or []:
        replicas = int(pool.get("replicaCount") or 0) if pool else 0
        if not replicas:
            continue
        machine = pool.get("machineSpec") or {}
        shape = machine_shape(machine)
        if shape in pools:
            pools[shape]["replicaCount"] += replicas
            continue
        spec: dict[str, Any] = {"machineType": shape[0]}
        if shape[1] != NO_ACCELERATOR:
            spec.update(acceleratorType=shape[1], acceleratorCount=shape[2])
        made: dict[str, Any] = {"machineSpec": spec, "replicaCount": replicas}
        if pool.get("diskSpec"):
            made["diskSpec"] = dict(pool["diskSpec"])
        pools[shape] = made
    return list(pools.values())


def resource_location(resource: Mapping[str, Any]) -> str | None:
    """The region in a resource's full name (projects/P/locations/L/persistentResources/ID); None if bare."""
    parts = str(resource.get("name", "")).split("/")
    return parts[3] if len(parts) >= 4 and parts[2] == "locations" else None


def resource_problems(job_spec: Mapping[str, Any], resource: Mapping[str, Any], location: str) -> list[str]:
    """Why a job in `location` cannot run on `resource`: another region (a job uses only a resource of its
    own location), a resource that is not RUNNING, or the pools' fit (`placement_problems`)."""
    problems = []
    where = resource_location(resource)
    if where is not None and where != location:
        problems.append(f"the persistent resource is in {where}, the job in {location} (it must be the same)")
    state = str(resource.get("state") or "STATE_UNSPECIFIED")
    if state != "RUNNING":
        problems.append(f"the persistent resource is {state}, not RUNNING")
    return problems + placement_problems(job_spec, resource)


def describe_pools(pools: Sequence[Mapping[str, Any]]) -> str:
    """`2 x a2-highgpu-4g with 4 x NVIDIA_TESLA_A100, 1 x n1-standard-8`: what a resource (would) hold."""
    shapes = [(_replicas(pool), machine_shape(pool.get("machineSpec") or {})) for pool in pools]
    return ", ".join(f"{count} x {describe_shape(shape)}" for count, shape in shapes)


Shape = tuple[str, str, int]


def replicas_asked(job_spec: Mapping[str, Any]) -> dict[Shape, int]:
    """The machines a job holds while it runs: its replicas by machine shape."""
    asked: dict[Shape, int] = {}
    for pool in job_spec.get("workerPoolSpecs") or []:
        replicas = int(pool.get("replicaCount") or 0) if pool else 0
        if replicas:
            shape = machine_shape(pool.get("machineSpec") or {})
            asked[shape] = asked.get(shape, 0) + replicas
    return asked


def fits_free(job_spec: Mapping[str, Any], resource: Mapping[str, Any], in_use: Mapping[Shape, int]) -> bool:
    """Whether the resource's machines not `in_use` (by the jobs running on it) can take the job now."""
    capacity: dict[Shape, int] = {}
    for pool in resource.get("resourcePools") or []:
        shape = machine_shape(pool.get("machineSpec") or {})
        capacity[shape] = capacity.get(shape, 0) + _replicas(pool)
    return all(
        asked <= capacity.get(shape, 0) - in_use.get(shape, 0)
        for shape, asked in replicas_asked(job_spec).items()
    )


def with_used(resource: Mapping[str, Any], in_use: Mapping[Shape, int]) -> dict[str, Any]:
    """The resource with each pool's `usedReplicaCount` (an int64, a decimal string in proto-JSON): the
    machines of its shape in use, given to its pools in order, each up to what it holds."""
    left = dict(in_use)
    pools = []
    for pool in resource.get("resourcePools") or []:
        shape = machine_shape(pool.get("machineSpec") or {})
        used = min(left.get(shape, 0), _replicas(pool))
        left[shape] = left.get(shape, 0) - used
        pools.append({**pool, "usedReplicaCount": str(used)})
    return {**resource, "resourcePools": pools}
