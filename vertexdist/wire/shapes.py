"""The JSON types of the request fields the emulator reads (and the wire reader normalises), checked first.

Google's front end parses a body into the API's protos and refuses a value of the wrong type with 400
(`Invalid value at 'custom_job.display_name' (TYPE_STRING), 5`). The emulator works on plain dicts, so it
checks the same types here, for the fields it uses: every later step may then trust them. Fields not
listed are passed through (Google would refuse unknown names; an SDK newer than this table must still
work). Proto-JSON rules (https://protobuf.dev/programming-guides/json/): int64 may be a number or a
decimal string, an enum a name or a number, and `null` is the field's default.
"""

from __future__ import annotations

import re
from typing import Any

Shape = Any  # a kind name, a {field: Shape} message, a [Shape] list, or a ("map", Shape)

STRING, INT, BOOL, ENUM = "string", "integer", "boolean", "enum"
_DECIMAL = re.compile(r"^-?[0-9]{1,19}$")

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
    "machineSpec": {"machineType": STRING, "acceleratorType": ENUM, "acceleratorCount": INT},
    "replicaCount": INT,
    "diskSpec": {"bootDiskType": STRING, "bootDiskSizeGb": INT},
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


def _kind_problem(kind: str, value: Any) -> str | None:
    if kind == STRING:
        return None if isinstance(value, str) else "a string"
    if kind == BOOL:
        return None if isinstance(value, bool) else "true or false"
    if kind == INT:
        if isinstance(value, bool):
            return "an integer"
        if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
            return None
        return None if isinstance(value, str) and _DECIMAL.match(value) else "an integer"
    if kind == ENUM:
        return None if isinstance(value, str | int) and not isinstance(value, bool) else "an enum name"
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
            wanted = _kind_problem(expected, item)
            if wanted is not None:
                found.append(f"{path}: expected {wanted}, got {_shown(item)}")
    return sorted(found)
