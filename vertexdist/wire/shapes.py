"""The JSON types of the request fields the emulator reads (and the wire reader normalises), checked first.

Google's front end parses a body into the API's protos and refuses a value of the wrong type with 400
(`Invalid value at 'custom_job.display_name' (TYPE_STRING), 5`). The emulator works on plain dicts, so it
checks the same types here, for the fields it uses: every later step may then trust them. Fields not
listed are passed through (Google would refuse unknown names; an SDK newer than this table must still
work). Proto-JSON rules (https://protobuf.dev/programming-guides/json/): int64 may be a number or a
decimal string, an enum a name or a number, and `null` is the field's default. A number outside its field's
range (int32 or int64) is refused in the words of Google's front end (`Invalid value at
'custom_job.job_spec.worker_pool_specs[1].replica_count' (TYPE_INT32), 1000000000000`), the field first as in
every message here, before anything sizes a job by it; `replicaCount` is held to int32, the limit Vertex
enforces for it.
"""

from __future__ import annotations

import re
from typing import Any

Shape = Any  # a kind name, a {field: Shape} message, a [Shape] list, or a ("map", Shape)

STRING, INT, INT32, NUMBER, BOOL, ENUM = "string", "integer", "int32", "number", "boolean", "enum"
_DECIMAL = re.compile(r"^-?[0-9]{1,19}$")
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
_RANGES = {INT: (-INT64_MAX - 1, INT64_MAX, "TYPE_INT64"), INT32: (-INT32_MAX - 1, INT32_MAX, "TYPE_INT32")}

_ENV_VAR = {"name": STRING, "value": STRING}
_CONTAINER_SPEC = {"imageUri": STRING, "command": [STRING], "args": [STRING], "env": [_ENV_VAR]}
_PYTHON_PACKAGE_SPEC = {
    "executorImageUri": STRING,
    "packageUris": [STRING],
    "pythonModule": STRING,
    "args": [STRING],
    "env": [_ENV_VAR],
}
_WORKER_POOL_SPEC = {
    "machineSpec": {"machineType": STRING, "acceleratorType": ENUM, "acceleratorCount": INT32},
    "replicaCount": INT32,
    "diskSpec": {"bootDiskType": STRING, "bootDiskSizeGb": INT32},
    "containerSpec": _CONTAINER_SPEC,
    "pythonPackageSpec": _PYTHON_PACKAGE_SPEC,
}
CUSTOM_JOB_SPEC: Shape = {
    "workerPoolSpecs": [_WORKER_POOL_SPEC],
    "baseOutputDirectory": {"outputUriPrefix": STRING},
    "scheduling": {
        "timeout": STRING,
        "restartJobOnWorkerRestart": BOOL,
        "strategy": ENUM,
        "disableRetries": BOOL,
        "maxWaitDuration": STRING,
    },
    "serviceAccount": STRING,
    "network": STRING,
    "tensorboard": STRING,
    "enableWebAccess": BOOL,
    "persistentResourceId": STRING,
}
_LABELS = ("map", STRING)
# A jobSpec may use snake_case names (proto-JSON takes both), so its fields are checked once camel-cased
# (`wire.normalize_job_spec`); so is a TrainingPipeline's trainingTaskInputs, a free-form Struct.
CUSTOM_JOB: Shape = {"displayName": STRING, "labels": _LABELS, "jobSpec": {}}
TRAINING_PIPELINE: Shape = {
    "displayName": STRING,
    "labels": _LABELS,
    "trainingTaskDefinition": STRING,
    "trainingTaskInputs": {},
}
# A HyperparameterTuningJob (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/StudySpec), checked
# once camel-cased; its trialJobSpec is a CustomJobSpec, checked as one. A parameter's conditional children
# are parameters again, so the shape refers to itself.
_PARAMETER: dict[str, Shape] = {
    "parameterId": STRING,
    "doubleValueSpec": {"minValue": NUMBER, "maxValue": NUMBER, "defaultValue": NUMBER},
    "integerValueSpec": {"minValue": INT, "maxValue": INT, "defaultValue": INT},
    "categoricalValueSpec": {"values": [STRING], "defaultValue": STRING},
    "discreteValueSpec": {"values": [NUMBER], "defaultValue": NUMBER},
    "scaleType": ENUM,
}
_PARAMETER["conditionalParameterSpecs"] = [
    {
        "parentDiscreteValues": {"values": [NUMBER]},
        "parentIntValues": {"values": [INT]},
        "parentCategoricalValues": {"values": [STRING]},
        "parameterSpec": _PARAMETER,
    }
]
_STOPPING = {"useElapsedDuration": BOOL}
STUDY_SPEC: Shape = {
    "metrics": [{"metricId": STRING, "goal": ENUM}],
    "parameters": [_PARAMETER],
    "algorithm": ENUM,
    "measurementSelectionType": ENUM,
    "observationNoise": ENUM,
    "medianAutomatedStoppingSpec": _STOPPING,
    "decayCurveStoppingSpec": _STOPPING,
    "convexAutomatedStoppingSpec": {},
}
TUNING_JOB: Shape = {
    "displayName": STRING,
    "labels": _LABELS,
    "studySpec": STUDY_SPEC,
    "maxTrialCount": INT32,
    "parallelTrialCount": INT32,
    "maxFailedTrialCount": INT32,
    "trialJobSpec": {},
}


def _integer(value: Any) -> int | None:
    """The integer a proto-JSON integer field holds (a number or a decimal string), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return int(value) if isinstance(value, str) and _DECIMAL.match(value) else None


def _kind_problem(kind: str, value: Any, path: str) -> str | None:
    if kind == STRING:
        return None if isinstance(value, str) else f"{path}: expected a string, got {_shown(value)}"
    if kind == BOOL:
        return None if isinstance(value, bool) else f"{path}: expected true or false, got {_shown(value)}"
    if kind in _RANGES:
        number = _integer(value)
        if number is None:
            return f"{path}: expected an integer, got {_shown(value)}"
        low, high, proto_type = _RANGES[kind]
        if not low <= number <= high:
            return f"{path}: Invalid value ({proto_type}), {_shown(value)}: out of range, at most {high}"
        return None
    if kind == NUMBER:  # a double: a number, or a string of one ("NaN", "1e-3")
        if isinstance(value, int | float) and not isinstance(value, bool):
            return None
        if isinstance(value, str):
            try:
                float(value)
            except ValueError:
                pass
            else:
                return None
        return f"{path}: expected a number, got {_shown(value)}"
    if kind == ENUM:
        if isinstance(value, str | int) and not isinstance(value, bool):
            return None
        return f"{path}: expected an enum name, got {_shown(value)}"
    raise AssertionError(f"unknown kind {kind}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def problems(value: Any, shape: Shape, where: str = "") -> list[str]:
    """Every place where `value` does not have `shape`, as `where.field: expected ..., got ...`."""
    found: list[str] = []
    stack: list[tuple[Any, Shape, str]] = [(value, shape, where)]
    while stack:
        item, expected, path = stack.pop()
        if item is None:
            continue
        if isinstance(expected, dict):
            if not isinstance(item, dict):
                found.append(f"{path}: expected an object, got {_shown(item)}")
                continue
            stack.extend((item[key], sub, _join(path, key)) for key, sub in expected.items() if key in item)
        elif isinstance(expected, list):
            if not isinstance(item, list):
                found.append(f"{path}: expected a list, got {_shown(item)}")
                continue
            for index, element in enumerate(item):
                if element is None:
                    found.append(f"{path}[{index}]: a list cannot hold null")
                else:
                    stack.append((element, expected[0], f"{path}[{index}]"))
        elif isinstance(expected, tuple):
            if not isinstance(item, dict):
                found.append(f"{path}: expected a map of names to values, got {_shown(item)}")
                continue
            stack.extend((v, expected[1], _join(path, k)) for k, v in item.items())
        else:
            wrong = _kind_problem(expected, item, path)
            if wrong is not None:
                found.append(wrong)
    return sorted(found)
