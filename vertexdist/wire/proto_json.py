"""Proto-JSON shapes of the Vertex REST API as plain dicts: what the emulator reads and writes, and how the
Vertex backend reads back what the service returns (never through the SDK's types).

Vertex REST bodies are proto3 JSON (https://protobuf.dev/programming-guides/json/): camelCase keys (original
snake_case names are accepted too), int64 as strings, enums as names or, with `$alt=json;enum-encoding=int`,
as numbers. A TrainingPipeline's `trainingTaskInputs` is a free-form Struct: the SDK fills it with snake_case
keys and every number as a float; `custom_job_spec_from_task_inputs` turns it into a CustomJobSpec.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from vertexdist.wire import shapes
from vertexdist.wire.enums import (
    ACCELERATOR_TYPES,
    JOB_STATES,
    PIPELINE_STATES,
    SCHEDULING_STRATEGIES,
    enum_name,
    enum_number,
)

CUSTOM_TASK_DEFINITION = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
_SNAKE = re.compile(r"_([a-z0-9])")


def now_rfc3339() -> str:
    """A Timestamp in proto-JSON form (UTC, microseconds, `Z`)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def camel(key: str) -> str:
    return _SNAKE.sub(lambda m: m.group(1).upper(), key)


def _camel_tree(value: Any, *, in_map: bool = False) -> Any:
    if isinstance(value, dict):
        # `labels` is a map: its keys are user data, not field names.
        return {
            (k if in_map else camel(k)): _camel_tree(v, in_map=(not in_map and camel(k) == "labels"))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_camel_tree(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _as_int(value: Any, field: str) -> int:
    try:
        number = float(value) if isinstance(value, str) else value
        if isinstance(number, bool) or not isinstance(number, int | float) or not float(number).is_integer():
            raise ValueError
        return int(number)
    except ValueError:
        raise ValueError(f"{field}: expected an integer, got {value!r}") from None


def normalize_job_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A CustomJobSpec with camelCase keys, ints for int fields and enum names (ValueError on bad enums)."""
    out: dict[str, Any] = _camel_tree(spec)
    wrong = shapes.problems(out, shapes.CUSTOM_JOB_SPEC)
    if wrong:
        raise ValueError("; ".join(wrong[:5]))
    for index, pool in enumerate(out.get("workerPoolSpecs") or []):
        for key in ("replicaCount",):
            if key in pool:
                pool[key] = _as_int(pool[key], f"workerPoolSpecs[{index}].{key}")
        machine = pool.get("machineSpec") or {}
        if "acceleratorCount" in machine:
            machine["acceleratorCount"] = _as_int(
                machine["acceleratorCount"], f"workerPoolSpecs[{index}].machineSpec.acceleratorCount"
            )
        if "acceleratorType" in machine:
            machine["acceleratorType"] = enum_name(
                ACCELERATOR_TYPES,
                machine["acceleratorType"],
                f"workerPoolSpecs[{index}].machineSpec.acceleratorType",
            )
        disk = pool.get("diskSpec") or {}
        if "bootDiskSizeGb" in disk:
            disk["bootDiskSizeGb"] = _as_int(
                disk["bootDiskSizeGb"], f"workerPoolSpecs[{index}].diskSpec.bootDiskSizeGb"
            )
    scheduling = out.get("scheduling")
    if isinstance(scheduling, dict) and "strategy" in scheduling:
        scheduling["strategy"] = enum_name(
            SCHEDULING_STRATEGIES, scheduling["strategy"], "scheduling.strategy"
        )
    return out


def custom_job_spec_from_task_inputs(inputs: Any) -> dict[str, Any]:
    """The CustomJobSpec inside a custom-task TrainingPipeline's `trainingTaskInputs`.

    The SDK writes `base_output_directory`, `worker_pool_specs` etc. at the top level of the Struct (plus
    TrainingPipeline-only keys such as `enable_dashboard_access` that a CustomJobSpec also has).
    """
    if not isinstance(inputs, dict):
        raise ValueError("trainingTaskInputs: expected an object holding workerPoolSpecs")
    return normalize_job_spec(inputs)


def encode_enums(resource: dict[str, Any], *, as_int: bool) -> dict[str, Any]:
    """A copy of a stored resource (enum names) with enums as numbers when the client asked for that."""
    if not as_int:
        return resource
    out = dict(resource)
    state = out.get("state")
    if isinstance(state, str):
        table = JOB_STATES if state.startswith("JOB_STATE_") else PIPELINE_STATES
        out["state"] = enum_number(table, state)
    spec = out.get("jobSpec")
    if isinstance(spec, dict):
        spec = dict(spec)
        pools = []
        for pool in spec.get("workerPoolSpecs") or []:
            machine = pool.get("machineSpec") if isinstance(pool, dict) else None
            if isinstance(machine, dict) and isinstance(machine.get("acceleratorType"), str):
                pool = {**pool, "machineSpec": {**machine}}
                pool["machineSpec"]["acceleratorType"] = enum_number(
                    ACCELERATOR_TYPES, machine["acceleratorType"]
                )
            pools.append(pool)
        if "workerPoolSpecs" in spec:
            spec["workerPoolSpecs"] = pools
        scheduling = spec.get("scheduling")
        if isinstance(scheduling, dict) and isinstance(scheduling.get("strategy"), str):
            spec["scheduling"] = {
                **scheduling,
                "strategy": enum_number(SCHEDULING_STRATEGIES, scheduling["strategy"]),
            }
        out["jobSpec"] = spec
    return out
