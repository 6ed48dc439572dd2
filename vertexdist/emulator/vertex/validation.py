"""What Vertex refuses with 400 INVALID_ARGUMENT: each pool's machine through the very rules `validate` runs
(`spec.machine_rules`), plus the request's own shape.

Messages follow Vertex's wording where it is known (docs/reference/vertex.md §6), e.g.
`Accelerator "NVIDIA_TESLA_K80" is not supported for machine type "n1-standard-4"`.

Beyond Vertex's rules, the emulator holds a job to what this machine can run (docs/commands/emulator.md,
"Limits on what a request may ask"): every replica is a process here, so a job asks for at most
`LOCAL_MAX_REPLICAS` replicas in all, and a tuning job's parallel trials count their replicas too.
"""

from __future__ import annotations

from typing import Any

from vertexdist.spec import catalog
from vertexdist.spec.durations import is_proto_duration
from vertexdist.spec.machine_rules import MachineChoice, check_machine
from vertexdist.spec.names import (
    display_name_problem,
    label_key_problem,
    label_value_problem,
    labels_count_problem,
)
from vertexdist.wire.gcs_uri import GsUriError, parse_gs_uri


def _is_gs(uri: object, *, object_name: bool = False) -> bool:
    """A `gs://BUCKET[/NAME]` URI (with `object_name`, one naming an object), read as every part reads one."""
    try:
        parse_gs_uri(str(uri), object_name=object_name)
    except GsUriError:
        return False
    return True


# Replicas the emulator starts for one job (all pools), or at once for one tuning job (parallel trials
# times each trial's replicas): each is a process on this machine, with a port, a log and a supervisor.
LOCAL_MAX_REPLICAS = 64

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
    for kind, code in (("pythonPackageSpec", package), ("containerSpec", container)):
        if isinstance(code, dict):
            problems += _process_text_problems(f"{where}.{kind}", code)
    return problems


def _process_text_problems(where: str, code: dict[str, Any]) -> list[str]:
    """What a replica's execve cannot take: a NUL inside an argument or an environment string, or an `=`
    in a variable's name (an entry is NAME=value; the replica would see another name)."""
    problems = [
        f"{where}.{field}[{index}] holds a NUL character (\\x00); a process argument cannot hold one"
        for field in ("command", "args")
        for index, arg in enumerate(code.get(field) or [])
        if "\x00" in str(arg)
    ]
    for index, entry in enumerate(code.get("env") or []):
        name, value = str((entry or {}).get("name") or ""), str((entry or {}).get("value") or "")
        if not name or "=" in name or "\x00" in name:
            problems.append(
                f"{where}.env[{index}].name {name!r} is not an environment variable name"
                " (not empty, no = or NUL)"
            )
        if "\x00" in value:
            problems.append(f"{where}.env[{index}].value holds a NUL character (\\x00)")
    return problems


def replica_total(spec: dict[str, Any]) -> int:
    """The replicas a (shape-checked) CustomJobSpec asks for, all pools together."""
    total = 0
    for pool in spec.get("workerPoolSpecs") or []:
        count = (pool or {}).get("replicaCount") or 0
        total += count if isinstance(count, int) else 0
    return total


def local_size_problems(spec: dict[str, Any], *, at_once: int = 1) -> list[str]:
    """Why this machine cannot run the job (`at_once` copies of it at a time); empty when it can."""
    total = replica_total(spec) * at_once
    if total <= LOCAL_MAX_REPLICAS:
        return []
    what = (
        f"{total} replicas" if at_once == 1 else f"{at_once} parallel trials of {total // at_once} replicas"
    )
    return [
        f"the job asks for {what}; the emulator runs at most {LOCAL_MAX_REPLICAS} replicas at once on this"
        " machine (each is a local process)"
    ]


def resource_problems(body: dict[str, Any], what: str) -> list[str]:
    """A created resource's displayName and labels, by the rules `validate` applies to templates."""
    problems = []
    name_problem = display_name_problem(str(body.get("displayName") or ""))
    if name_problem:
        problems.append(f"{what}.displayName: {name_problem}")
    labels = body.get("labels") or {}
    if isinstance(labels, dict):
        count = labels_count_problem(len(labels))
        if count:
            problems.append(f"{what}.labels: {count}")
        for key, value in labels.items():
            for problem in (label_key_problem(str(key)), label_value_problem(str(value))):
                if problem:
                    problems.append(f"{what}.labels: {problem}")
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
    if not problems:
        problems += local_size_problems(spec)
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
