"""The backend interface and the plain data that crosses it (torchx `schedulers/api.py` shape).

`dryrun(template, options) -> request` builds the exact request; `schedule(request, options)` runs that very
request and returns the job's name, so `submit --dry-run` and `local-run --plan` show what runs. `describe`,
`list`, `cancel`, `logs` and `outputs` address a job by that name. Every backend has these same signatures;
what one backend needs and another does not (Vertex's image and resumed folder, local's scratch folder and
event callback) travels in one `SubmitOptions`, each field saying which backends read it.

The backends are named in `vertexdist.backends.BACKENDS` and made with `create_backend(name, target)`:
`vertex` (Vertex AI, or the emulator, through google-cloud-aiplatform; its request is a `Submission`) and
`local` (this machine; a `LocalRequest`, or a `LocalTuningRequest` for a tuning template).

What a backend consumes: Vertex takes the rendered request as it is; every other backend reads the rendered
CustomJobSpec once into `vertexdist.wire.job_spec.JobSpec` (`parse_job_spec`) and runs that typed job, so a
backend never reads template fields or raw proto-JSON of its own. A new backend is one package under
`vertexdist/backends/` with a class of this shape, and one line in `BACKENDS`.

The job and replica states and events below are the local runtime's (`vertexdist.local.runner` emits them;
`LocalJob` is a `JobHandle`), named as Vertex names them (JobState); views and services read them here, not
from the runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from vertexdist.spec.models import JobTemplate
from vertexdist.wire.study import StudySpec
from vertexdist.wire.trials import Trial, best_trial

if TYPE_CHECKING:
    from vertexdist.backends.outputs import OutputSource


class JobState(str, Enum):
    PENDING = "JOB_STATE_PENDING"
    RUNNING = "JOB_STATE_RUNNING"
    SUCCEEDED = "JOB_STATE_SUCCEEDED"
    FAILED = "JOB_STATE_FAILED"
    CANCELLING = "JOB_STATE_CANCELLING"
    CANCELLED = "JOB_STATE_CANCELLED"

    @property
    def done(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


class ReplicaState(str, Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"  # ended by the job (another replica failed, job done, cancel, timeout)


@dataclass(frozen=True)
class JobError:
    """Why a job failed: a google.rpc.Code value (as Vertex reports `job.error.code`), the message, and the
    replica that failed first."""

    code: int
    message: str
    replica: str | None = None
    exit_code: int | None = None


@dataclass(frozen=True)
class ReplicaStatus:
    name: str
    state: ReplicaState
    log_path: Path
    pid: int | None = None
    exit_code: int | None = None
    attempt: int = 0  # the job's attempt (0, then 1.. after whole-job restarts)
    restarts: int = 0  # times this replica was restarted on its own, in every attempt together


@dataclass(frozen=True)
class JobEvent:
    """One state change: of the job (`replica` is None) or of one replica."""

    time: float
    job_state: JobState
    replica: ReplicaStatus | None = None
    message: str = ""
    error: JobError | None = None


@dataclass(frozen=True)
class JobResult:
    """A finished job: its state, error, every replica's last status, restarts and time taken."""

    state: JobState
    error: JobError | None
    replicas: tuple[ReplicaStatus, ...]
    restarts: int
    elapsed_s: float


# The project of a job where no Google Cloud project is needed (a local run, an emulator) and none is named:
# such a job needs a name, not a project.
LOCAL_PROJECT = "vertexdist-local"


def with_project(template: JobTemplate) -> JobTemplate:
    """The template with a project: its own, else LOCAL_PROJECT (for a job that runs here)."""
    if template.project is not None:
        return template
    return template.model_copy(update={"project": LOCAL_PROJECT})


TERMINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "PAUSED", "EXPIRED"})


class JobList(list["JobStatus"]):
    """What `list` returns: the jobs it could read, and one line per job (or answer) it could not, so one
    unreadable job never hides the others (the console and `vertexdist list` show the lines as problems)."""

    def __init__(self, jobs: Iterable[JobStatus] = (), problems: Iterable[str] = ()) -> None:
        super().__init__(jobs)
        self.problems: list[str] = list(problems)


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
    # The entry's JSON payload where the source has one (Cloud Logging's `jsonPayload`): what a structured
    # line carries besides its text (`vertexdist ranks` reads the heartbeats in it).
    payload: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)


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

    def timeline(self) -> list[StateChange]:
        """The tuning job's course: created, each trial's start and end, its own end."""
        from vertexdist.wire.timestamps import parse_ns

        status = self.status
        steps = [StateChange(status.create_time, "QUEUED")] if status.create_time else []
        for trial in self.trials:
            if trial.start_time:
                steps.append(StateChange(trial.start_time, "ACTIVE", replica=f"trial {trial.id}"))
            if trial.end_time:
                reason = trial.infeasible_reason or ""
                steps.append(
                    StateChange(trial.end_time, trial.state, replica=f"trial {trial.id}", message=reason)
                )
        if status.end_time:
            steps.append(StateChange(status.end_time, status.state, message=status.error or ""))

        def when(step: StateChange) -> int:
            try:
                return parse_ns(step.time)
            except ValueError:
                return 0

        return sorted(steps, key=when)


class JobHandle(Protocol):
    """A job running on this machine, as views follow it (`vertexdist.local.runner.LocalJob` is one)."""

    @property
    def state(self) -> JobState: ...

    @property
    def error(self) -> JobError | None: ...

    @property
    def restarts(self) -> int: ...

    @property
    def done(self) -> bool: ...

    def replicas(self) -> list[ReplicaStatus]: ...

    def log_paths(self) -> dict[str, Path]:
        """Replica name (`workerpool0-0`) -> its log file."""
        ...

    def cancel(self) -> None: ...

    def wait(self, timeout: float | None = None) -> JobResult | None: ...

    def result(self) -> JobResult: ...


@dataclass(frozen=True)
class SubmitOptions:
    """What one submission asks of a backend besides its template; each backend reads the fields it knows.

    - `image_uri` (vertex): the container image a `build` template's pools run (built, or planned).
    - `resume_from`: the earlier job whose output folder this one continues: a gs:// folder (vertex), a
      run id or run folder (local).
    - `scratch` (local, dry run): nothing is made but the sdist, there (a plan only).
    - `on_event` (local): called with each job and replica state change as it happens.
    """

    image_uri: str | None = None
    resume_from: str | None = None
    scratch: Path | None = None
    on_event: Callable[[JobEvent], None] | None = None


NO_OPTIONS = SubmitOptions()

RequestT = TypeVar("RequestT")


class Backend(Protocol[RequestT]):
    def dryrun(self, template: JobTemplate, options: SubmitOptions = NO_OPTIONS) -> RequestT: ...

    def schedule(self, request: RequestT, options: SubmitOptions = NO_OPTIONS) -> str: ...

    def describe(self, name: str) -> JobStatus: ...

    def replicas(self, name: str) -> list[ReplicaInfo]: ...

    def timeline(self, name: str) -> list[StateChange]: ...

    def list(self, limit: int = 50) -> list[JobStatus]: ...

    def cancel(self, name: str) -> None: ...

    def logs(self, name: str, cursor: object | None = None, query: LogQuery | None = None) -> LogsPage: ...

    def outputs(self, name: str) -> OutputSource: ...


ProgressFn = Callable[[int, int], None]
