"""The backend interface and the plain data that crosses it (torchx `schedulers/api.py` shape).

`dryrun(template) -> request` builds the exact request; `schedule(request)` runs that very request and returns
the job's name, so `submit --dry-run` and `local-run --plan` show what runs. `describe`, `list`, `cancel` and
`logs` address a job by that name. Two implementations: `backends.vertex` (Vertex AI, or the emulator, through
google-cloud-aiplatform; the request is a `Submission`) and `backends.local` (this machine; a `LocalRequest`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from vertexdist.spec.models import JobTemplate

TERMINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "PAUSED", "EXPIRED"})


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


RequestT = TypeVar("RequestT")


class Backend(Protocol[RequestT]):
    def dryrun(self, template: JobTemplate) -> RequestT: ...

    def schedule(self, request: RequestT) -> str: ...

    def describe(self, name: str) -> JobStatus: ...

    def list(self, limit: int = 50) -> list[JobStatus]: ...

    def cancel(self, name: str) -> None: ...

    def logs(self, name: str, offsets: dict[str, int] | None = None) -> LogsPage: ...
