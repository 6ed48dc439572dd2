"""The job's health mark: a random value vertexdist puts into every pool's env as it creates a job (after
the request is hashed, as the job folder is filled in), which the job's watchers write into each heartbeat
and verdict line and take out of the script's environment. `vertexdist ranks` and the console read only the
lines that carry it, so a line the script prints is never taken for the watchers'. Pure."""

from __future__ import annotations

import copy
from typing import Any

# Held equal to vertexdist_launcher.health.MARK_VARIABLE by tests/health/test_log_scan.py.
MARK_VARIABLE = "VERTEXDIST_HEALTH_MARK"
_MAX_ENV = 100  # Vertex's limit on a container's env entries


def _code_specs(request: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for resource, key in (
        ("trainingPipeline", "trainingTaskInputs"),
        ("hyperparameterTuningJob", "trialJobSpec"),
    ):
        spec = (request.get(resource) or {}).get(key)
        if isinstance(spec, dict):
            for pool in spec.get("workerPoolSpecs") or []:
                code = (
                    (pool.get("pythonPackageSpec") or pool.get("containerSpec"))
                    if isinstance(pool, dict)
                    else None
                )
                if isinstance(code, dict):
                    found.append(code)
    return found


def has_mark(request: dict[str, Any]) -> bool:
    return any(
        isinstance(e, dict) and e.get("name") == MARK_VARIABLE
        for c in _code_specs(request)
        for e in c.get("env") or []
    )


def with_mark(request: dict[str, Any], mark: str) -> dict[str, Any]:
    """A copy of the request whose every pool's env holds the mark (replacing one it had)."""
    marked = without_mark(request)
    for code in _code_specs(marked):
        env = list(code.get("env") or [])
        if len(env) < _MAX_ENV:
            code["env"] = [*env, {"name": MARK_VARIABLE, "value": mark}]
    return marked


def without_mark(request: dict[str, Any]) -> dict[str, Any]:
    """A copy of the request with no mark in any env (rendered requests always name an env list)."""
    clean = copy.deepcopy(request)
    for code in _code_specs(clean):
        if isinstance(code.get("env"), list):
            code["env"] = [
                e for e in code["env"] if not (isinstance(e, dict) and e.get("name") == MARK_VARIABLE)
            ]
    return clean
