"""The backend interface and the plain data that crosses it (torchx `schedulers/api.py` shape).

`dryrun(template) -> Submission` builds the exact request; `schedule(submission)` sends that very request,
so `submit --dry-run` shows what `submit` sends. `describe`, `list`, `cancel`, `logs` address a job by
its Vertex resource name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from vertexdist.spec.models import JobTemplate

TERMINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "PAUSED", "EXPIRED"})


@dataclass(frozen=True)
class Submission:
    """A request ready to send, with the package it refers to (None for container jobs)."""

    request: dict[str, Any]  # the CreateTrainingPipeline body: {"parent", "trainingPipeline"}
    request_hash: str
    package_path: Path | None = None
    package_uri: str | None = None

    @property
    def parent(self) -> str:
        return str(self.request["parent"])


@dataclass(frozen=True)
class JobStatus:
    """What `status` shows: the state (without the JOB_STATE_/PIPELINE_STATE_ prefix), times, error."""

    name: str
    display_name: str
    state: str
    create_time: str | None = None
    start_time: str | None = None
    end_time: str | None = None
    error: str | None = None
    backing_job: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    console_url: str | None = None
    spec: dict[str, Any] = field(default_factory=dict)  # the CustomJobSpec, secrets masked
    # Values of secret-looking env entries, so log text can be masked too; never printed.
    secret_values: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @property
    def done(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def succeeded(self) -> bool:
        return self.state == "SUCCEEDED"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "displayName": self.display_name,
            "state": self.state,
            "createTime": self.create_time,
            "startTime": self.start_time,
            "endTime": self.end_time,
            "error": self.error,
            "backingCustomJob": self.backing_job,
            "labels": self.labels,
            "consoleUrl": self.console_url,
            "spec": self.spec,
        }


@dataclass(frozen=True)
class LogChunk:
    replica: str
    text: str
    next_offset: int


@dataclass(frozen=True)
class LogsPage:
    """New log text per replica since the offsets asked for; `links` where logs live elsewhere (Vertex)."""

    chunks: list[LogChunk]
    links: list[str] = field(default_factory=list)

    def offsets(self) -> dict[str, int]:
        return {chunk.replica: chunk.next_offset for chunk in self.chunks}


class Backend(Protocol):
    def dryrun(self, template: JobTemplate) -> Submission: ...

    def schedule(self, submission: Submission) -> str: ...

    def describe(self, name: str) -> JobStatus: ...

    def list(self, limit: int = 50) -> list[JobStatus]: ...

    def cancel(self, name: str) -> None: ...

    def logs(self, name: str, offsets: dict[str, int] | None = None) -> LogsPage: ...
