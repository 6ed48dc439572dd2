"""The template's `health:` section: when the job is called hung, when a rank is a straggler, and when a
silent job is told where its ranks are.

Pure: no torch, no google. Render passes it to the workers as one variable (`VERTEXDIST_HEALTH`, JSON),
read by the shipped launcher's watcher (`vertexdist_launcher.health`) and the local runs' monitor.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vertexdist.spec.durations import ACCEPTED_FORMS, parse_duration
from vertexdist.spec.findings import Finding

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate

CONFIG_VARIABLE = "VERTEXDIST_HEALTH"  # held equal to vertexdist_launcher.health.CONFIG_VARIABLE by a test
DEFAULT_HANG_TIMEOUT_S = 1800  # 30 min: longer than a slow checkpoint save or evaluation, far below 7 days
DEFAULT_STRAGGLER_RATIO = 1.5
# 10 min: Vertex starts each replica when its VM is ready (image pull, package install), so ranks join minutes
# apart; held equal to vertexdist_launcher.timeouts.DEFAULT_RENDEZVOUS_TIMEOUT_S by a test
DEFAULT_RENDEZVOUS_TIMEOUT_S = 600
# Below this a hang_timeout ends healthy jobs: a checkpoint save, an evaluation or a slow first collective
# each make no step for longer.
MIN_SENSIBLE_HANG_TIMEOUT_S = 60
# 2 min: a job that prints nothing and makes no step for that long gets a line saying where each rank is;
# held equal to vertexdist.local.health_monitor's default by a test
DEFAULT_SILENCE_S = 120


class HealthSpec(BaseModel):
    """Rank health: hang and straggler detection (docs/guide/rank-health.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)

    hang_timeout: int | None = Field(
        default=DEFAULT_HANG_TIMEOUT_S,
        description=(
            "How long no rank may make progress, once every rank has made its first step, before the job"
            f" is called hung and ended; `never` turns it off. Default 30m. {ACCEPTED_FORMS}."
        ),
    )
    straggler_ratio: float = Field(
        default=DEFAULT_STRAGGLER_RATIO,
        gt=1.0,
        le=100.0,
        description="A rank whose own step time is over this many times the ranks' median is a straggler.",
    )

    rendezvous_timeout: int = Field(
        default=DEFAULT_RENDEZVOUS_TIMEOUT_S,
        gt=0,
        description=(
            "How long a rank waits for the others to join: torchrun's rendezvous, the bundled trainer's"
            f" init_process_group and Ray workers joining the head. Default 10m. {ACCEPTED_FORMS}."
        ),
    )

    silence: int | None = Field(
        default=DEFAULT_SILENCE_S,
        description=(
            "How long a local or emulator job may print nothing and make no step before it gets one status"
            " line naming where each rank's main thread is (the job goes on); `never` turns it off."
            f" Default 2m. {ACCEPTED_FORMS}."
        ),
    )

    @field_validator("silence", mode="before")
    @classmethod
    def _silence(cls, value: object) -> int | None:
        if value is None or (isinstance(value, str) and value.strip().lower() == "never"):
            return None
        return int(parse_duration(value))

    @field_validator("rendezvous_timeout", mode="before")
    @classmethod
    def _join(cls, value: object) -> int:
        return int(parse_duration(value))

    @field_validator("hang_timeout", mode="before")
    @classmethod
    def _timeout(cls, value: object) -> int | None:
        if value is None or (isinstance(value, str) and value.strip().lower() == "never"):
            return None
        return int(parse_duration(value))

    def env_value(self) -> str:
        """The value of VERTEXDIST_HEALTH the workers get."""
        return json.dumps(
            {
                "hang_timeout": self.hang_timeout,
                "straggler_ratio": self.straggler_ratio,
                "rendezvous_timeout": self.rendezvous_timeout,
                "silence": self.silence,
            },
            separators=(",", ":"),
        )


def _shown(seconds: int) -> str:
    """A duration as a template writes it: 2h, 90m, 45s."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def hang_timeout_fits(t: JobTemplate) -> Iterator[Finding]:
    """Warnings for a hang_timeout written into the template that cannot act as meant: past the job's own
    `timeout` (the job ends as timed out first, with no verdict), or too short for a healthy job."""
    health = t.health
    if health is None or "hang_timeout" not in health.model_fields_set or health.hang_timeout is None:
        return
    hang = health.hang_timeout
    if t.timeout is not None and hang >= t.timeout:
        yield Finding(
            "health.hang_timeout",
            f"hang_timeout {_shown(hang)} is not shorter than the job's timeout"
            f" {_shown(t.timeout)}: a hung job ends at its timeout first, with no verdict naming"
            " the rank that hung",
            "make hang_timeout shorter than timeout (or write `never` to turn hang detection off)",
            "warning",
        )
    if hang < MIN_SENSIBLE_HANG_TIMEOUT_S:
        yield Finding(
            "health.hang_timeout",
            f"hang_timeout {_shown(hang)} is shorter than a checkpoint save, an evaluation or a"
            " slow first collective often takes: a healthy job would be ended as hung",
            f"use at least {_shown(MIN_SENSIBLE_HANG_TIMEOUT_S)} (the default is"
            f" {_shown(DEFAULT_HANG_TIMEOUT_S)})",
            "warning",
        )


RULES = (hang_timeout_fits,)
