"""What the console's pages show, read through the backends (`backends.create_backend`): the local runs
(`LocalBackend`; its `tuning` part for tuning runs and their trials) and one Vertex or emulator target
(`VertexBackend`).

Every job is addressed by a `refs.JobRef`; a ref that names no job raises `NotFound` (the page answers 404),
a backend that cannot be reached raises `Unavailable` (the page says so; the other source still shows).
Managed jobs (`submit --managed`): an `AttemptSource` gives a job's attempts (`console.managed` reads them
from the managed jobs' store); a job labelled as an attempt lists as kind "managed".

An emulator's folder (`emulator_dir`, where `submit --emulator` leaves its jobs) may hold jobs of several
projects and regions: the list shows every one, and a job's full name comes from the folder. An emulator
that does not answer is said to be down (`EMULATOR_DOWN`), and a job's metrics that cannot be read say so
(`STORAGE_UNREACHABLE`), never that the job wrote none.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from vertexdist.backends.base import (
    TERMINAL_STATES,
    JobStatus,
    LogQuery,
    LogsPage,
    ReplicaInfo,
    StateChange,
    TuningStatus,
)
from vertexdist.backends.local.logs import masked
from vertexdist.console.attempts import Attempt
from vertexdist.console.errors import NotFound, Unavailable
from vertexdist.console.managed import attempt_windows, is_local_attempt
from vertexdist.console.metrics import ScalarReaders, Series, Window, trial_series
from vertexdist.console.notes import SERVICE_TASK, merge_notes, service_notes, silence_notice
from vertexdist.console.refs import JobRef, vertex_ref
from vertexdist.errors import VertexdistError
from vertexdist.managed.attempts import MANAGED_LABEL
from vertexdist.private_files import make_private_dir
from vertexdist.wire.timestamps import parse_ns

if TYPE_CHECKING:
    from vertexdist.backends.config import Target
    from vertexdist.backends.local import LocalBackend
    from vertexdist.backends.local.tuning import LocalTuningBackend
    from vertexdist.backends.vertex import VertexBackend
    from vertexdist.goodput.ledger import Ledger

EMULATOR_DOWN = "emulator not answering; `vertexdist emulator start`"
STORAGE_UNREACHABLE = "storage unreachable"
KEEP_ROWS = 100_000  # rows of finished local jobs kept between list pages (see `_kept`)
# Ended emulator or Vertex custom jobs whose goodput ledger one list page reads (on Vertex, from the job's
# logs); a ledger read is kept, so later pages fill in the rest.
LEDGERS_PER_LIST = 8
KIND_CUSTOM = "custom job"
KIND_PIPELINE = "pipeline"
KIND_TUNING = "tuning"
KIND_MANAGED = "managed"
KINDS = (KIND_CUSTOM, KIND_PIPELINE, KIND_TUNING, KIND_MANAGED)
_KIND_OF_COLLECTION = {
    "trainingPipelines": KIND_PIPELINE,
    "customJobs": KIND_CUSTOM,
    "hyperparameterTuningJobs": KIND_TUNING,
}


def page_backend(target: Target) -> VertexBackend:
    """The Vertex (or emulator) backend for the console's reads: a page waits on these calls, so a stopped
    emulator shows as such at once, not after a minute of retries."""
    from vertexdist.backends import create_backend
    from vertexdist.backends.vertex.retry import RetryPolicy

    return create_backend("vertex", target, retry=RetryPolicy(attempts=2, initial_s=0.2, max_s=1.0))


class AttemptSource(Protocol):
    """What `submit --managed` registers (`Console.attempt_sources`): a job's attempts, or None when the job
    is not a managed one."""

    def attempts(self, ref: JobRef, status: JobStatus) -> list[Attempt] | None: ...


@dataclass(frozen=True)
class JobRow:
    """One line of the job list."""

    ref: JobRef
    display_name: str
    kind: str
    state: str
    where: str  # "local", "emulator" or "Vertex"
    create_time: str | None
    start_time: str | None
    end_time: str | None
    duration_s: float | None
    cost: float | None  # USD at the price table's prices so far; None where a part is unpriced
    goodput: float | None = None  # productive / billed, for an ended job whose ledger reads

    @property
    def sort_key(self) -> str:
        return self.create_time or self.start_time or ""

    @property
    def url(self) -> str:
        """The row's page: a PipelineJob's is its pipeline page, any other job's its job page."""
        collection, _, ident = self.ref.job.partition("/")
        if self.ref.source == "vertex" and collection == "pipelineJobs":
            return f"/pipelines/{ident}"
        return f"/jobs/{self.ref.path}"


@dataclass(frozen=True)
class JobPage:
    row: JobRow
    status: JobStatus
    replicas: list[ReplicaInfo]
    timeline: list[StateChange]
    tuning: TuningStatus | None = None
    attempts: list[Attempt] | None = None
    parent: JobRef | None = None  # a trial's tuning run
    links: list[str] = field(default_factory=list)
    goodput: list[dict[str, Any]] | None = None  # the ledger's stacked bar: `goodput_bar`
    silence: StateChange | None = None  # a running job's latest silence line (`console.notes`)


def _seconds(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return parse_ns(stamp) / 1e9
    except ValueError:
        return None


def duration_s(status: JobStatus, now: float) -> float | None:
    """From its start (or creation) to its end, or to now while it runs."""
    start = _seconds(status.start_time) or _seconds(status.create_time)
    if start is None:
        return None
    end = _seconds(status.end_time)
    if end is None:
        end = now if status.state not in TERMINAL_STATES else start
    return max(0.0, end - start)


def goodput_bar(ledger: Ledger) -> list[dict[str, Any]]:
    """The ledger's stacked bar: each category with time, its share of the billed time (percent) and its
    dollars, in the ledger's order."""
    from vertexdist.goodput.ledger import CATEGORIES, LABELS

    billed = ledger.billed_s
    dollars = ledger.dollars()
    return [
        {
            "name": name,
            "label": LABELS[name],
            "seconds": ledger.categories[name],
            "percent": 100.0 * ledger.categories[name] / billed,
            "usd": dollars[name],
        }
        for name in CATEGORIES
    ]


def job_cost(spec: dict[str, Any], location: str | None, seconds: float | None) -> float | None:
    from vertexdist.estimate.costs import cost_so_far

    if seconds is None or not location:
        return None
    return cost_so_far(spec, location, seconds)


def tuning_cost(tuning: TuningStatus, location: str | None, now: float) -> float | None:
    """Every trial's time on the trial job's machines: each trial runs the job once."""
    total = 0.0
    for trial in tuning.trials:
        start, end = _seconds(trial.start_time), _seconds(trial.end_time)
        if start is None:
            continue
        cost = job_cost(tuning.status.spec, location, max(0.0, (end or now) - start))
        if cost is None:
            return None
        total += cost
    return total


class Console:
    """The console's read model over `local` (the runs folder) and `remote` (Vertex or an emulator)."""

    def __init__(
        self,
        runs_dir: Path,
        remote: VertexBackend | None = None,
        *,
        cache_dir: Path,
        clock: Callable[[], float] = time.time,
        emulator_dir: Path | None = None,
    ) -> None:
        from vertexdist.backends import create_backend
        from vertexdist.backends.local import LocalOptions

        self.runs_dir = Path(runs_dir)
        self.local = create_backend("local", LocalOptions(runs_dir=self.runs_dir))
        self.local_tuning: LocalTuningBackend = self.local.tuning
        self.remote = remote
        self.emulator_dir = emulator_dir  # the remote is the emulator serving this folder
        self._listers: dict[str, VertexBackend] = {}  # a folder's projects/P/locations/L -> its backend
        # What it caches (a job's TensorBoard files) is the user's alone, as the run folders are.
        self.cache_dir = make_private_dir(Path(cache_dir))
        self.clock = clock
        self.scalar_readers = ScalarReaders()
        self.attempt_sources: list[AttemptSource] = []
        self._rows: dict[str, tuple[object, JobRow]] = {}  # local job id -> (its version, its row)
        self._secret_values: dict[str, tuple[str, ...]] = {}  # a remote job's path -> its secret values
        self._ledgers: dict[str, Ledger] = {}  # an ended remote custom job's name -> its goodput ledger
        # A remote job's name -> the Ranks panel's scan of its log lines (console.ranks.LogFollow).
        self.rank_follows: dict[str, Any] = {}
        self.rank_follows_lock = threading.Lock()

    # --- where ------------------------------------------------------------------------------------
    @property
    def remote_where(self) -> str:
        if self.remote is None:
            return ""
        return "emulator" if self.remote.target.is_emulator else "Vertex"

    @property
    def remote_label(self) -> str:
        """What the page header says the remote target is."""
        if self.remote is None:
            return ""
        target = self.remote.target
        if self.emulator_dir is not None:
            return f"emulator {self.emulator_dir} at {target.api_endpoint}"
        return f"{self.remote_where} {target.parent}" + (
            f" at {target.api_endpoint}" if target.is_emulator else ""
        )

    def _remote_name(self, ref: JobRef) -> str:
        if self.remote is None:
            raise NotFound(f"no Vertex target: {ref.path} is not shown here")
        if self.emulator_dir is not None:
            from vertexdist.jobs.emulator_jobs import job_resource_name

            collection, _, ident = ref.job.partition("/")
            found = job_resource_name(self.emulator_dir, collection, ident)
            if found is not None:
                return found
        return f"{self.remote.target.parent}/{ref.job}"

    def _listed(self) -> list[VertexBackend]:
        """The backends whose jobs the list shows: the remote's project, and with an emulator's folder, every
        project and region it holds jobs of."""
        if self.remote is None:
            return []
        if self.emulator_dir is None:
            return [self.remote]
        from vertexdist.jobs.emulator_jobs import job_parents

        found = [self.remote]
        for parent in job_parents(self.emulator_dir):
            if parent == self.remote.target.parent:
                continue
            if parent not in self._listers:
                _, project, _, location = parent.split("/")
                target = dataclasses.replace(self.remote.target, project=project, location=location)
                self._listers[parent] = page_backend(target)
            found.append(self._listers[parent])
        return found

    def problem(self, exc: VertexdistError) -> str:
        """What a page says of a failed call: an emulator that does not answer is said to be down."""
        from vertexdist.backends.errors import is_unreachable

        cause = exc.__cause__
        target = self.remote.target if self.remote is not None else None
        if target is not None and target.is_emulator and cause is not None and is_unreachable(cause):
            return EMULATOR_DOWN
        return exc.message

    # --- the list ---------------------------------------------------------------------------------
    def rows(self) -> tuple[list[JobRow], list[str]]:
        """Every job, newest first, and what could not be read (a source that did not answer)."""
        now = self.clock()
        rows: list[JobRow] = []
        problems: list[str] = []
        for name in self.local.names():
            try:
                make = functools.partial(self._local_row_of, name, now)
                rows.append(self._kept(name, self.local.version(name), make))
            except VertexdistError:
                continue  # a folder being written, or removed, between listing and reading
        for name in self.local_tuning.names():
            try:
                make = functools.partial(self._tuning_row_of, name, now)
                rows.append(self._kept(name, self.local_tuning.version(name), make))
            except VertexdistError:
                continue
        budget = LEDGERS_PER_LIST
        for remote in self._listed():
            try:
                found = remote.list(limit=500)
            except VertexdistError as exc:
                problems.append(f"{self.remote_label}: {self.problem(exc)}")
                break  # one emulator or Vertex: the other projects' calls would fail the same way
            # What the backend could not read (JobList.problems): one line each, the rest still listed.
            problems += [f"{self.remote_label}: {line}" for line in getattr(found, "problems", ())]
            for status in found:
                ref = vertex_ref(status.name)
                if ref is None:
                    continue
                row = self._remote_row(ref, status, now)
                if status.state in TERMINAL_STATES and (status.name in self._ledgers or budget > 0):
                    budget -= 0 if status.name in self._ledgers else 1
                    ledger = self._remote_ledger(ref, remote, status.name)
                    row = dataclasses.replace(row, goodput=ledger.goodput if ledger is not None else None)
                rows.append(row)
            rows += self._pipeline_rows(remote, now, problems)
        rows.sort(key=lambda row: row.sort_key, reverse=True)
        return rows, problems

    def _kept(self, name: str, version: object, make: Callable[[], JobRow]) -> JobRow:
        """The row of a finished local job as made before while its files are unchanged, else made now.
        (A running job's row is made anew each time: its duration and cost grow.)"""
        kept = self._rows.get(name)
        if version is not None and kept is not None and kept[0] == version:
            return kept[1]
        row = make()
        if version is not None and row.state in TERMINAL_STATES:
            if len(self._rows) >= KEEP_ROWS:
                self._rows.clear()
            self._rows[name] = (version, row)
        return row

    def _row(self, ref: JobRef, status: JobStatus, kind: str, where: str, cost: float | None) -> JobRow:
        return JobRow(
            ref=ref,
            display_name=status.display_name or ref.job,
            kind=kind,
            state=status.state,
            where=where,
            create_time=status.create_time,
            start_time=status.start_time,
            end_time=status.end_time,
            duration_s=duration_s(status, self.clock()),
            cost=cost,
        )

    def _local_row_of(self, name: str, now: float) -> JobRow:
        return self._local_row(JobRef("local", name), self.local.describe(name), now)

    def _tuning_row_of(self, name: str, now: float) -> JobRow:
        return self._tuning_row(JobRef("local", name), self.local_tuning.tuning(name), now)

    def _local_row(self, ref: JobRef, status: JobStatus, now: float) -> JobRow:

        cost = job_cost(status.spec, status.location, duration_s(status, now))
        kind = KIND_MANAGED if is_local_attempt(self.local.run_dir(ref.job)) else KIND_CUSTOM
        row = self._row(ref, status, kind, "local", cost)
        if status.state in TERMINAL_STATES:
            ledger = self._local_ledger(ref)
            row = dataclasses.replace(row, goodput=ledger.goodput if ledger is not None else None)
        return row

    def _local_ledger(self, ref: JobRef) -> Ledger | None:
        """A local run's goodput ledger (docs/guide/goodput.md), from its run folder."""
        from vertexdist.health.folder import HEALTH_DIR
        from vertexdist.jobs.goodput import ledger_at

        return ledger_at(self.local, ref.job, self.local.run_dir(ref.job) / HEALTH_DIR)

    def _remote_ledger(self, ref: JobRef, backend: VertexBackend, name: str) -> Ledger | None:
        """An ended emulator or Vertex custom job's goodput ledger: its heartbeats from the emulator's folder,
        else from its logs (as `vertexdist goodput` reads them); kept once read."""
        if not ref.job.startswith("customJobs/"):
            return None
        kept = self._ledgers.get(name)
        if kept is not None:
            return kept
        from vertexdist.console.heartbeat_place import health_folder
        from vertexdist.jobs.goodput import ledger_at

        try:
            where = health_folder(self, ref)
        except VertexdistError:
            return None
        ledger = ledger_at(backend, name, where if isinstance(where, Path) else None)
        if ledger is not None and ledger.billed_s > 0:
            if len(self._ledgers) >= KEEP_ROWS:
                self._ledgers.clear()
            self._ledgers[name] = ledger
        return ledger

    def _tuning_row(self, ref: JobRef, tuning: TuningStatus, now: float) -> JobRow:
        cost = tuning_cost(tuning, tuning.status.location, now)
        return self._row(ref, tuning.status, KIND_TUNING, "local", cost)

    def _remote_row(self, ref: JobRef, status: JobStatus, now: float) -> JobRow:
        kind = KIND_MANAGED if MANAGED_LABEL in status.labels else _KIND_OF_COLLECTION[ref.job.split("/")[0]]
        cost = job_cost(status.spec, status.location, duration_s(status, now))
        return self._row(ref, status, kind, self.remote_where, cost)

    # --- pipelines (console.pipelines) -------------------------------------------------------------
    def _pipeline_rows(self, remote: VertexBackend, now: float, problems: list[str]) -> list[JobRow]:
        """The target's PipelineJobs as list rows (kind "pipeline"); a failed list is one problem line."""
        from vertexdist.console.pipelines import list_pipeline_jobs, pipeline_ref, short_state

        try:
            jobs = list_pipeline_jobs(remote, 500)
        except VertexdistError as exc:  # no answer, or one the SDK cannot read (pipelines.Unavailable)
            problems.append(f"{self.remote_label}: {self.problem(exc)}")
            return []
        rows = []
        for job in jobs:
            ref = pipeline_ref(str(job.get("name", "")))
            if ref is None:
                continue
            state = short_state(job.get("state"))
            created, started, ended = (job.get(k) or None for k in ("createTime", "startTime", "endTime"))
            start = _seconds(started) or _seconds(created)
            end = _seconds(ended) or (now if state not in TERMINAL_STATES else start)
            rows.append(
                JobRow(
                    ref=ref,
                    display_name=str(job.get("displayName") or ref.job.split("/")[-1]),
                    kind=KIND_PIPELINE,
                    state=state,
                    where=self.remote_where,
                    create_time=created,
                    start_time=started,
                    end_time=ended,
                    duration_s=max(0.0, end - start) if start is not None and end is not None else None,
                    cost=None,
                )
            )
        return rows

    def pipeline(self, ident: str) -> dict[str, Any]:
        """A PipelineJob as the pipeline page shows it (`pipelines.pipeline_view`), from the first listed
        project that has it."""
        from vertexdist.console.pipelines import PIPELINE_ID, get_pipeline_job, pipeline_view

        if not PIPELINE_ID.fullmatch(ident):
            raise NotFound("no such pipeline")
        self._remote()
        return pipeline_view(self._call(lambda: get_pipeline_job(self._listed(), ident)))

    # --- one job ----------------------------------------------------------------------------------
    def _call(self, what: Callable[[], Any]) -> Any:
        """A backend call, its errors as NotFound (no such job) or Unavailable (no answer)."""
        from vertexdist.backends.errors import ApiCallError
        from vertexdist.backends.local import UnknownLocalJob
        from vertexdist.backends.local.tuning import UnknownTuningRun

        try:
            return what()
        except (NotFound, Unavailable):
            raise
        except (UnknownLocalJob, UnknownTuningRun) as exc:
            raise NotFound(exc.message) from None
        except ApiCallError as exc:
            if exc.status == 404:
                raise NotFound(exc.message) from None
            problem = self.problem(exc)
            raise Unavailable(problem, None if problem == EMULATOR_DOWN else exc.hint) from None
        except VertexdistError as exc:
            raise Unavailable(exc.message, exc.hint) from None

    def is_tuning(self, ref: JobRef) -> bool:
        if ref.source == "local":
            return ref.trial is None and self.local_tuning.owns(ref.job)
        return ref.job.startswith("hyperparameterTuningJobs/")

    def _local_job(self, ref: JobRef) -> tuple[LocalBackend, str]:
        """The local backend holding `ref`'s job, and its name there (a trial's is its id)."""
        if ref.trial is None:
            return self.local, ref.job
        if not self.local_tuning.owns(ref.job):
            raise NotFound(f"no tuning run {ref.job}")
        return self.local_tuning.trial_jobs(ref.job), ref.trial

    def status(self, ref: JobRef) -> JobStatus:
        """The job's status (what the live view polls)."""
        if ref.source == "local":
            if self.is_tuning(ref):
                return self._call(lambda: self.local_tuning.describe(ref.job))
            backend, name = self._local_job(ref)
            return self._call(lambda: backend.describe(name))
        return self._call(lambda: self._remote().describe(self._remote_name(ref)))

    def _remote(self) -> VertexBackend:
        if self.remote is None:
            raise NotFound("no Vertex target: start the console with --endpoint or --project to see its jobs")
        return self.remote

    def replicas(self, ref: JobRef) -> list[ReplicaInfo]:
        if self.is_tuning(ref):
            return []
        if ref.source == "local":
            backend, name = self._local_job(ref)
            return self._call(lambda: backend.replicas(name))
        return self._call(lambda: self._remote().replicas(self._remote_name(ref)))

    def timeline(self, ref: JobRef) -> list[StateChange]:
        """The job's state changes (a tuning job's: its trials' starts and ends)."""
        tuning = self.tuning(ref)
        if tuning is not None:
            return tuning.timeline()
        if ref.source == "local":
            backend, name = self._local_job(ref)
            return self._call(lambda: backend.timeline(name))
        return self._remote_timeline(ref)

    def _remote_timeline(self, ref: JobRef) -> list[StateChange]:
        """A Vertex or emulator job's state changes, with its own log lines (task `service`) among them."""
        name = self._remote_name(ref)
        steps = self._call(lambda: self._remote().timeline(name))
        try:
            page = self._remote().logs(name, None, LogQuery(replica=SERVICE_TASK))
        except VertexdistError:
            return steps  # the logs cannot be read now: the state changes still show
        secrets = self._secrets(ref)
        return merge_notes(steps, service_notes(masked(page, secrets).chunks))

    def silence(self, ref: JobRef) -> StateChange | None:
        """A local run's latest silence line while it runs (read from its events; a remote job's come
        with its logs, task `service`)."""
        if ref.source != "local" or self.is_tuning(ref):
            return None
        backend, name = self._local_job(ref)
        status = self._call(lambda: backend.describe(name))
        return silence_notice(self._call(lambda: backend.timeline(name)), status.state)

    def _header_row(self, ref: JobRef, status: JobStatus, tuning: TuningStatus | None, now: float) -> JobRow:
        if ref.source != "local":
            return self._remote_row(ref, status, now)
        if tuning is not None:
            return self._tuning_row(ref, tuning, now)
        row = self._local_row(ref, status, now)
        if ref.trial is not None:
            parent = self._call(lambda: self.local_tuning.describe(ref.job))
            cost = job_cost(status.spec or parent.spec, parent.location, row.duration_s)
            row = self._row(ref, status, "trial", "local", cost)
        return row

    def header(self, ref: JobRef, status: JobStatus | None = None) -> JobRow:
        """The facts of a job's page header now (times, duration, cost so far), from `status` when given:
        what the page updates while the job runs."""
        tuning = self.tuning(ref)
        if tuning is not None:
            status = tuning.status
        elif status is None:
            status = self.status(ref)
        return self._header_row(ref, status, tuning, self.clock())

    def page(self, ref: JobRef) -> JobPage:
        now = self.clock()
        tuning = self.tuning(ref)
        status = tuning.status if tuning is not None else self.status(ref)
        row = self._header_row(ref, status, tuning, now)
        timeline: list[StateChange]
        if tuning is not None:
            timeline = tuning.timeline()
        elif ref.source == "local":
            backend, name = self._local_job(ref)
            timeline = self._call(lambda: backend.timeline(name))
        else:
            timeline = self._remote_timeline(ref)
        attempts = None
        for source in self.attempt_sources:
            attempts = source.attempts(ref, status)
            if attempts is not None:
                row = dataclasses.replace(row, kind=KIND_MANAGED)
                break
        ledger = None
        if tuning is None and ref.source == "local":
            ledger = self._local_ledger(ref)
        elif tuning is None and status.state in TERMINAL_STATES:
            ledger = self._remote_ledger(ref, self._remote(), self._remote_name(ref))
        if ledger is not None:
            row = dataclasses.replace(row, goodput=ledger.goodput)
        return JobPage(
            row=row,
            status=status,
            replicas=[] if tuning is not None else self.replicas(ref),
            timeline=timeline,
            tuning=tuning,
            attempts=attempts,
            parent=ref.parent,
            links=[status.console_url] if status.console_url else [],
            goodput=goodput_bar(ledger) if ledger is not None and ledger.billed_s > 0 else None,
            silence=silence_notice(timeline, status.state) if tuning is None else None,
        )

    def tuning(self, ref: JobRef) -> TuningStatus | None:
        """A tuning job's status, study and trials; None for other jobs."""
        if not self.is_tuning(ref):
            return None
        if ref.source == "local":
            return self._call(lambda: self.local_tuning.tuning(ref.job))
        return self._call(lambda: self._remote().tuning(self._remote_name(ref)))

    def trial_ref(self, ref: JobRef, trial_id: str, custom_job: str | None) -> JobRef | None:
        """Where a trial's own job has a page: a local trial's folder, a Vertex trial's CustomJob."""
        if ref.source == "local":
            return JobRef("local", ref.job, trial_id)
        return vertex_ref(custom_job) if custom_job else None

    def _attempt_windows(self, ref: JobRef) -> list[Window] | None:
        """A managed job's attempts share one output folder: its scalars cut by attempt (console.managed)."""

        if not self.attempt_sources or ref.trial is not None:
            return None
        try:
            status = self.status(ref)
        except (NotFound, Unavailable):
            return None
        for source in self.attempt_sources:
            attempts = source.attempts(ref, status)
            if attempts is not None:
                return attempt_windows(attempts, ref)
        return None

    # --- logs, metrics ----------------------------------------------------------------------------
    def logs(self, ref: JobRef, cursor: object | None, query: LogQuery) -> LogsPage:
        """Log lines after `cursor` (the backend's own cursor, kept by the caller between reads)."""
        if ref.source == "local":
            if self.is_tuning(ref):
                return LogsPage(chunks=[])
            backend, name = self._local_job(ref)
            return self._call(lambda: backend.logs(name, cursor, query))  # masked by the local backend
        page = self._call(lambda: self._remote().logs(self._remote_name(ref), cursor, query))
        return masked(page, self._secrets(ref))

    def _secrets(self, ref: JobRef) -> tuple[str, ...]:
        """A remote job's secret env values (its spec never changes), to mask them in its log text."""
        if ref.path not in self._secret_values:
            self._secret_values[ref.path] = self.status(ref).secret_values
        return self._secret_values[ref.path]

    def metrics(self, ref: JobRef) -> list[Series]:
        """The job's TensorBoard scalars; a tuning job's trial measurements of its objective."""
        from vertexdist.backends.outputs import NoOutputs, tensorboard_folder

        tuning = self.tuning(ref)
        if tuning is not None:
            metric = tuning.study.objective.id if tuning.study else ""
            return trial_series(tuning.trials, metric) if metric else []
        series: list[Series] = []
        if ref.source == "local":
            backend, name = self._local_job(ref)
            source_of: Callable[[], Any] = lambda: backend.outputs(name)  # noqa: E731
        else:
            source_of = lambda: self._remote().outputs(self._remote_name(ref))  # noqa: E731
        try:
            source = self._call(source_of)
            cache = self.cache_dir / "tensorboard" / ref.path.replace("/", "_")
            folder = self._call(lambda: tensorboard_folder(source, cache))
        except NoOutputs:
            folder = None
        except Unavailable as exc:
            # Not "no scalars": they could not be read.
            raise Unavailable(f"{STORAGE_UNREACHABLE}: {exc.message}", exc.hint) from None
        if folder is not None:
            series += self.scalar_readers.scalars(folder, self._attempt_windows(ref))
        if ref.source == "local" and ref.trial is not None:
            parent = self.tuning(JobRef("local", ref.job))
            if parent is not None and parent.study is not None:
                trials = [t for t in parent.trials if t.id == ref.trial]
                series += trial_series(trials, parent.study.objective.id)
        return series
