"""The CustomJobSpec one trial runs: the tuning job's `trialJobSpec` with the trial's `--ID=VALUE` arguments
after every pool's own, and its outputs under `<baseOutputDirectory>/<trial id>/` (so AIP_MODEL_DIR is
`<base>/<trial id>/model/`, docs/reference/vertex.md §1.3). Pure.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from vertexdist.wire.job_spec import REDUCTION_SERVER_IMAGE_MARK


def trial_job_spec(spec: Mapping[str, Any], trial_id: str, args: Sequence[str]) -> dict[str, Any]:
    """`spec` (a normalized, camelCase CustomJobSpec) as trial `trial_id` runs it."""
    out: dict[str, Any] = copy.deepcopy(dict(spec))
    pools = out.get("workerPoolSpecs") or []
    for pool in [pools] if isinstance(pools, dict) else pools:
        if not isinstance(pool, dict):
            continue
        key = "pythonPackageSpec" if pool.get("pythonPackageSpec") else "containerSpec"
        code = pool.get(key)
        if not isinstance(code, dict):
            continue
        if key == "containerSpec" and REDUCTION_SERVER_IMAGE_MARK in str(code.get("imageUri", "")):
            continue  # the reduction servers run Google's image, not the trainer
        # A new dict per pool: pools may share one (deepcopy keeps shared objects shared).
        pool[key] = {**code, "args": [*(code.get("args") or []), *args]}
    base = (out.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if base:
        out["baseOutputDirectory"] = {
            **out["baseOutputDirectory"],
            "outputUriPrefix": f"{base.rstrip('/')}/{trial_id}",
        }
    return out


def trial_output_uri(spec: Mapping[str, Any], trial_id: str) -> str | None:
    """Where trial `trial_id` writes its outputs (None when the job names no baseOutputDirectory)."""
    base = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    return f"{str(base).rstrip('/')}/{trial_id}" if base else None
