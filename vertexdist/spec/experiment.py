"""The `experiment:` section of a template: the job is logged as a run of a Vertex AI Experiment.

A name, as the SDK's `aiplatform.init(experiment=...)` takes it (`experiment: NAME` for short), with an
optional `experiment_run` (the SDK's `CustomJob.run(experiment=..., experiment_run=...)`); without one,
each job is a run of its own. Both become ML Metadata context ids (the run's is `EXPERIMENT-RUN`, as the
SDK forms it), so they are lowercase letters, digits and hyphens, and the run's id fits the 128 characters
a context id may have.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_ID = 128
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def _check_id(value: str, what: str) -> str:
    if not _ID.match(value):
        raise ValueError(
            f"{what} {value!r} must be lowercase letters, digits and hyphens, starting with a letter or digit"
            " (it becomes a Vertex ML Metadata context id)"
        )
    if len(value) > MAX_ID:
        raise ValueError(f"{what} is {len(value)} characters; at most {MAX_ID}")
    return value


class ExperimentSpec(BaseModel):
    """The Vertex AI Experiment a job is logged to, and the name of its run in it."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    name: str = Field(description="The experiment, e.g. lr-sweep (created when it does not exist).")
    experiment_run: str | None = Field(
        default=None,
        description="The run's name in the experiment; default: one run per job, named after the job.",
    )

    @model_validator(mode="before")
    @classmethod
    def _name_alone(cls, value: Any) -> Any:
        """`experiment: lr-sweep` is `experiment: {name: lr-sweep}`."""
        return {"name": value} if isinstance(value, str) else value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _check_id(value, "experiment name")

    @field_validator("experiment_run")
    @classmethod
    def _run(cls, value: str | None) -> str | None:
        return None if value is None else _check_id(value, "experiment_run")

    @model_validator(mode="after")
    def _run_id_fits(self) -> ExperimentSpec:
        if self.experiment_run is not None and len(self.run_context_id(self.experiment_run)) > MAX_ID:
            raise ValueError(
                f"experiment name and experiment_run together make the run id"
                f" {self.run_context_id(self.experiment_run)!r}, over {MAX_ID} characters; shorten one"
            )
        return self

    def run_context_id(self, run: str) -> str:
        """The run's ML Metadata context id, as the SDK forms it."""
        return f"{self.name}-{run}"
