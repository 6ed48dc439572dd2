"""A HyperparameterTuningJob, as the client returns it, read into its status, its study and its trials.

Read through the one wire reader (`vertexdist.wire.study`), from the resource's proto-JSON, so a job from
Vertex and one from the emulator read the same.
"""

from __future__ import annotations

from typing import Any

from vertexdist.backends.base import TuningStatus
from vertexdist.backends.config import Target
from vertexdist.backends.vertex.status import status_of
from vertexdist.wire.study import StudySpec, TuningSpecError, normalize_tuning_job, parse_study_spec
from vertexdist.wire.trials import trial_from_json

__all__ = ["TuningStatus", "tuning_status_of"]


def tuning_status_of(resource: Any, target: Target) -> TuningStatus:
    from google.protobuf import json_format

    data: dict[str, Any] = json_format.MessageToDict(type(resource).pb(resource))
    try:
        study: StudySpec | None = parse_study_spec(normalize_tuning_job(data).get("studySpec"))
    except (TuningSpecError, ValueError):
        study = None
    return TuningStatus(
        status=status_of(resource, target),
        study=study,
        trials=[trial_from_json(t) for t in data.get("trials") or []],
    )
