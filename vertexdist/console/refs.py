"""A job's address in the console's URLs, parsed strictly: an id that is not exactly one of these is no job.

- `local/<local job id>`: a local-run job or tuning run under the runs folder (`local-20240501-120000-ab12`);
- `local/<local job id>/trials/<trial id>`: one trial of a local tuning run (its own local job);
- `vertex/<collection>/<numeric id>`: a TrainingPipeline, CustomJob or HyperparameterTuningJob of the
  console's Vertex (or emulator) target.

Nothing else parses: no `..`, no encoded slash, no second id, so no address reaches a file outside the runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vertexdist.backends.local.prepare import is_job_id

COLLECTIONS = ("trainingPipelines", "customJobs", "hyperparameterTuningJobs")
_NUMERIC = re.compile(r"[0-9]{1,24}")
_TRIAL = re.compile(r"[0-9]{1,9}")


@dataclass(frozen=True)
class JobRef:
    source: str  # "local" or "vertex"
    job: str  # the local job id, or "<collection>/<id>"
    trial: str | None = None  # a local tuning run's trial

    @property
    def path(self) -> str:
        """The ref as it reads in URLs (`/jobs/<path>`)."""
        tail = f"/trials/{self.trial}" if self.trial is not None else ""
        return f"{self.source}/{self.job}{tail}"

    @property
    def parent(self) -> JobRef | None:
        """The tuning run a trial belongs to."""
        return JobRef(self.source, self.job) if self.trial is not None else None


def parse_ref(path: str) -> JobRef | None:
    """The ref `path` names, or None: the caller answers 404."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "local" and is_job_id(parts[1]):
        return JobRef("local", parts[1])
    if (
        len(parts) == 4
        and parts[0] == "local"
        and is_job_id(parts[1])
        and parts[2] == "trials"
        and _TRIAL.fullmatch(parts[3])
    ):
        return JobRef("local", parts[1], parts[3])
    if len(parts) == 3 and parts[0] == "vertex" and parts[1] in COLLECTIONS and _NUMERIC.fullmatch(parts[2]):
        return JobRef("vertex", f"{parts[1]}/{parts[2]}")
    return None


def vertex_ref(name: str) -> JobRef | None:
    """The ref of a full Vertex resource name (projects/P/locations/L/<collection>/<id>)."""
    parts = name.split("/")
    return parse_ref(f"vertex/{parts[-2]}/{parts[-1]}") if len(parts) >= 2 else None
