"""The backend interface and the plain data that crosses it (torchx `schedulers/api.py` shape).

`dryrun(template) -> request` builds the exact request; `schedule(request)` runs that very request and returns
the job's name, so `submit --dry-run` and `local-run --plan` show what runs. `describe`, `list`, `cancel`,
`logs` and `outputs` address a job by that name. Two implementations: `backends.vertex` (Vertex AI, or the
emulator, through google-cloud-aiplatform; the request is a `Submission`) and `backends.local` (this machine;
a `LocalRequest`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from vertexdist.spec.models import JobTemplate
from vertexdist.wire.study import StudySpec
from vertexdist.wire.trials import Trial, best_trial

if TYPE_CHECKING:
    from vertexdist.backends.outputs import OutputSource

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
    location: str | None = None  # the job's region (where it would run, for a local job), for its prices
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


# Cloud Logging's severities, lowest first (https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry#LogSeverity).
SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")


def severity_rank(name: str) -> int:
    """0 for DEFAULT up to 8 for EMERGENCY; ValueError for another name."""
    return SEVERITIES.index(name.upper())


@dataclass(frozen=True)
class LogQuery:
    """Which log lines `logs` returns: one replica's (`workerpool1-0`), one trial's, at least a severity,
    none older than `since` (seconds since the epoch)."""

    replica: str | None = None
    trial: str | None = None
    severity: str | None = None
    since: float | None = None


@dataclass(frozen=True)
class LogChunk:
    """Log text of one replica (its lines, in order), prefixed by `replica` where it is shown."""

    replica: str
    text: str
    severity: str = "DEFAULT"
    timestamp: str | None = None  # RFC 3339, where the source knows it


@dataclass(frozen=True)
class LogsPage:
    """Log lines in time order. `cursor` is the backend's own: pass it back to get what came after (nothing
    twice, nothing skipped). `more`: more is ready now, ask again at once. `links`: where else logs are shown.
    """

    chunks: list[LogChunk]
    cursor: object | None = None
    more: bool = False
    links: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ReplicaInfo:
    """One replica of a job: its pool's machine, its state and, where the backend knows it, its exit code.

    Vertex reports no replica states: there a replica's state is the job's and its exit code is unknown."""

    name: str  # workerpool1-0
    pool: int
    machine_type: str
    state: str  # PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED (ended by the job), or the job's state
    exit_code: int | None = None
    attempt: int = 0  # restarts of this replica's job so far (0: the first attempt)


@dataclass(frozen=True)
class StateChange:
    """One step of a job's timeline: the job (`replica` None) or one replica reached `state` at `time`."""

    time: str  # RFC 3339
    state: str
    replica: str | None = None
    exit_code: int | None = None
    message: str = ""


@dataclass(frozen=True)
class TuningStatus:
    """A tuning job's status with its study and its trials (Vertex's, the emulator's, a local run's)."""

    status: JobStatus
    study: StudySpec | None
    trials: list[Trial] = field(default_factory=list)

    @property
    def best(self) -> Trial | None:
        return best_trial(self.trials, self.study.objective) if self.study else None


RequestT = TypeVar("RequestT")


class Backend(Protocol[RequestT]):
    def dryrun(self, template: JobTemplate) -> RequestT: ...

    def schedule(self, request: RequestT) -> str: ...

    def describe(self, name: str) -> JobStatus: ...

    def replicas(self, name: str) -> list[ReplicaInfo]: ...

    def timeline(self, name: str) -> list[StateChange]: ...

    def list(self, limit: int = 50) -> list[JobStatus]: ...

    def cancel(self, name: str) -> None: ...

    def logs(self, name: str, cursor: object | None = None, query: LogQuery | None = None) -> LogsPage: ...

    def outputs(self, name: str) -> OutputSource: ...
