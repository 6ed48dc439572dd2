"""What Vertex refuses with 400 INVALID_ARGUMENT: each pool's machine through the very rules `validate` runs
(`spec.machine_rules`), plus the request's own shape.

Messages follow Vertex's wording where it is known (docs/reference/vertex.md §6), e.g.
`Accelerator "NVIDIA_TESLA_K80" is not supported for machine type "n1-standard-4"`.
"""

from __future__ import annotations

from typing import Any

from vertexdist.spec import catalog
from vertexdist.spec.durations import is_proto_duration
from vertexdist.spec.machine_rules import MachineChoice, check_machine
from vertexdist.wire.gcs_uri import GsUriError, parse_gs_uri


def _is_gs(uri: object, *, object_name: bool = False) -> bool:
    """A `gs://BUCKET[/NAME]` URI (with `object_name`, one naming an object), read as every part reads one."""
    try:
        parse_gs_uri(str(uri), object_name=object_name)
    except GsUriError:
        return False
    return True


_MACHINE_FIELDS = {
    "machine_type": "machineType",
    "accelerator_type": "acceleratorType",
    "accelerator_count": "acceleratorCount",
}


def _pool_problems(index: int, pool: dict[str, Any]) -> list[str]:
    where = f"workerPoolSpecs[{index}]"
    problems: list[str] = []
    machine = pool.get("machineSpec") or {}
    machine_type = machine.get("machineType")
    if not machine_type:
        return [f"{where}.machineSpec.machineType is required"]
    choice = MachineChoice(
        str(machine_type), machine.get("acceleratorType"), int(machine.get("acceleratorCount") or 0)
    )
    for finding in check_machine(choice):
        if finding.severity == "error":
            field = _MACHINE_FIELDS.get(finding.path, finding.path)
            problems.append(f"{where}.machineSpec.{field}: {finding.api_message or finding.message}")
    replicas = pool.get("replicaCount", 0)
    if not isinstance(replicas, int) or replicas < 1:
        problems.append(f"{where}.replicaCount must be at least 1, got {replicas!r}")
    elif index == 0 and replicas != 1:
        problems.append(f"{where}.replicaCount must be 1 for the primary replica pool, got {replicas}")
    package, container = pool.get("pythonPackageSpec"), pool.get("containerSpec")
    if bool(package) == bool(container):
        problems.append(f"{where}: exactly one of containerSpec and pythonPackageSpec is required")
    if package:
        for field in ("executorImageUri", "pythonModule"):
            if not package.get(field):
                problems.append(f"{where}.pythonPackageSpec.{field} is required")
        uris = package.get("packageUris") or []
        if not uris:
            problems.append(f"{where}.pythonPackageSpec.packageUris must name at least one package")
        problems += [
            f"{where}.pythonPackageSpec.packageUris: {uri!r} is not a gs://BUCKET/OBJECT URI"
            for uri in uris
            if not _is_gs(uri, object_name=True)
        ]
    if container and not container.get("imageUri"):
        problems.append(f"{where}.containerSpec.imageUri is required")
    return problems


def job_spec_problems(spec: dict[str, Any]) -> list[str]:
    """Every reason Vertex would refuse this (normalized, camelCase) CustomJobSpec; empty when it is fine."""
    pools = spec.get("workerPoolSpecs")
    if not isinstance(pools, list) or not pools:
        return ["workerPoolSpecs must hold at least one worker pool"]
    if len(pools) > 4:
        return [f"workerPoolSpecs holds {len(pools)} pools; Vertex takes at most 4"]
    problems: list[str] = []
    if not pools[0]:
        problems.append("workerPoolSpecs[0] (the primary replica) must not be empty")
    for index, pool in enumerate(pools):
        if pool:
            problems += _pool_problems(index, pool)
    base = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if base is not None and not _is_gs(base):
        problems.append(f"baseOutputDirectory.outputUriPrefix: {base!r} is not a gs:// URI")
    scheduling = spec.get("scheduling") or {}
    for field in ("timeout", "maxWaitDuration"):
        value = scheduling.get(field)
        if value is not None and not is_proto_duration(value):
            problems.append(f'scheduling.{field}: {value!r} is not a duration like "3600s"')
    return problems


def location_problems(location: str) -> list[str]:
    if catalog.known_region(location):
        return []
    return [f'location "{location}" does not offer Vertex AI custom training']
