"""Running a template on this machine: what `vertexdist local-run` does, as calls a recovery controller or a
web console can make too; the CLI adds flags, signals and printing.

    run = start_local(LocalRunRequest(template, procs_per_replica=1), on_event=events.put)
    result = follow_local(run.job, view, events)      # the view gets events and new log lines
    print(run.summary()["state"])

A tuning template starts a `LocalTuningRun` instead (`start_local_tuning`): its trials are local jobs of
their own, run by the emulator's own study loop. `plan_local` is the dry run (`local-run --plan`): it
starts and leaves nothing.
"""

from __future__ import annotations

import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from vertexdist.backends import create_backend
from vertexdist.backends.base import JobEvent, JobHandle, JobResult, SubmitOptions
from vertexdist.log_files import LogFollower

if TYPE_CHECKING:
    from vertexdist.backends.local import LocalBackend
    from vertexdist.jobs.local_faults import LocalFaults
    from vertexdist.spec.models import JobTemplate
    from vertexdist.tuning.driver import Snapshot, TuningRun

RUNS_DIR = Path(".vertexdist/runs")


@dataclass(frozen=True)
class LocalRunRequest:
    """A template to run here, and how (the flags of `local-run`)."""

    template: JobTemplate
    out: Path | None = None  # the run folder itself (default: <runs_dir>/<job id>)
    runs_dir: Path = RUNS_DIR
    procs_per_replica: int | None = None
    docker: bool = False
    resume_from: str | None = None  # an earlier run (id or folder) whose output folder this one continues
    timeout_s: float | None = None
    grace_s: float = 5.0
    warm: bool = False  # replicas forked from the warm pool where they can be (`local.warm_pool`)
    warm_socket: Path | None = None  # ... from this pool, kept by its owner (`jobs.attempt_pool`)
    seed: int | None = None  # tuning: random and bayesian suggestions (None: a fresh draw)
    faults: LocalFaults | None = None  # a fault plan's faults (--fault-plan); template jobs only


def _template(request: LocalRunRequest, env: Mapping[str, str] = os.environ) -> JobTemplate:
    """The template as it runs here: with no `project:`, the project submit would take from the environment
    (the replicas see it as CLOUD_ML_PROJECT_ID), else the backend's LOCAL_PROJECT."""
    template = request.template
    project = env.get("GOOGLE_CLOUD_PROJECT")
    if template.project is None and project:
        return template.model_copy(update={"project": project})
    return template


def local_backend(request: LocalRunRequest) -> LocalBackend:
    from vertexdist.backends.local.prepare import LocalOptions

    options = LocalOptions(
        runs_dir=request.runs_dir,
        out=request.out,
        procs_per_replica=request.procs_per_replica,
        docker=request.docker,
        warm=request.warm,
        warm_socket=request.warm_socket,
    )
    return create_backend(
        "local", options, grace_s=request.grace_s, timeout_s=request.timeout_s, seed=request.seed
    )


def plan_local(request: LocalRunRequest) -> dict[str, Any]:
    """What would run, started and left nowhere: the launch plan (secrets masked; `timeout_s` set), or for a
    tuning template the CreateHyperparameterTuningJob body (secrets masked)."""
    from vertexdist.backends.local.tuning import LocalTuningRequest
    from vertexdist.render import mask_secrets

    backend = local_backend(request)
    # The sdist (needed for the package URI) goes to a temporary folder.
    with tempfile.TemporaryDirectory(prefix="vertexdist-plan-") as scratch:
        dry = backend.dryrun(
            _template(request), SubmitOptions(scratch=Path(scratch), resume_from=request.resume_from)
        )
        if isinstance(dry, LocalTuningRequest):
            return mask_secrets(dry.request)
        dry.release()
    plan = dry.to_dict()
    if request.timeout_s is not None:
        plan["timeout_s"] = request.timeout_s
    return plan


@dataclass
class LocalRun:
    """A job started here: follow `job`, then read `summary()` (what its run folder's summary.json holds)."""

    backend: LocalBackend
    name: str

    @property
    def job(self) -> JobHandle:
        return self.backend.job(self.name)

    @property
    def run_dir(self) -> Path:
        return self.backend.run_dir(self.name)

    @property
    def secret_values(self) -> tuple[str, ...]:
        """The job's secret env values, to mask in any log line shown."""
        return self.backend.secret_values(self.name)

    def summary(self) -> dict[str, Any]:
        return self.backend.summary(self.name)


def start_local(
    request: LocalRunRequest,
    *,
    on_event: Callable[[JobEvent], None] | None = None,
    before_start: Callable[[Path], None] | None = None,
) -> LocalRun:
    """Package, plan and start the (non-tuning) template's job; `on_event` gets each state change;
    `before_start` is called with the job's run folder (made) just before the job is started."""
    from vertexdist.local.request import LocalRequest
    from vertexdist.private_files import make_private_dir

    backend = local_backend(request)
    options = SubmitOptions(resume_from=request.resume_from, on_event=on_event)
    dry = backend.dryrun(_template(request), options)

    def schedule() -> str:
        if before_start is not None and isinstance(dry, LocalRequest):
            try:
                before_start(make_private_dir(dry.run_dir))
            except BaseException:
                dry.release()
                raise
        return backend.schedule(dry, options)

    faults = request.faults
    if faults is None or not isinstance(dry, LocalRequest):
        return LocalRun(backend, schedule())
    spec = dict(dry.job.raw)
    try:  # a quota refusal is raised here, as Vertex refuses the create call
        failure = faults.before_create(dry.ctx.region, spec, dry.job_id)
    except BaseException:
        dry.release()
        raise
    name = schedule()
    faults.arm(backend.job(name), name, spec, failure)
    return LocalRun(backend, name)


class JobView(Protocol):
    """What `follow_local` feeds: the job's events and its replicas' new log lines, and a refresh tick."""

    def start(self) -> None: ...

    def event(self, event: JobEvent) -> None: ...

    def log(self, replica: str, line: str) -> None: ...

    def refresh(self, job: JobHandle) -> None: ...

    def stop(self) -> None: ...


def follow_local(
    job: JobHandle,
    view: JobView,
    events: queue.Queue[JobEvent],
    *,
    interval_s: float = 0.1,
    mask: Callable[[str], str] = lambda line: line,
) -> JobResult:
    """Feed `view` with the job's events and new log lines (each through `mask`) until the job is done.

    If the view fails (stdout closed under `local-run ... | head`, say), the job is cancelled and waited for
    before the error goes on: its replicas run in their own sessions and would otherwise outlive the caller.
    """
    follower = LogFollower()
    try:
        view.start()
        _follow(job, _Masked(view, mask), events, follower, interval_s)
    except BaseException:
        job.cancel()
        job.wait()
        raise
    return job.result()


class _Masked:
    """A view whose log lines have the job's secret values masked, as `vertexdist logs` masks them."""

    def __init__(self, view: JobView, mask: Callable[[str], str]) -> None:
        self._view = view
        self._mask = mask

    def start(self) -> None:
        self._view.start()

    def event(self, event: JobEvent) -> None:
        self._view.event(event)

    def log(self, replica: str, line: str) -> None:
        self._view.log(replica, self._mask(line))

    def refresh(self, job: JobHandle) -> None:
        self._view.refresh(job)

    def stop(self) -> None:
        self._view.stop()


def _follow(
    job: JobHandle, view: JobView, events: queue.Queue[JobEvent], follower: LogFollower, interval_s: float
) -> None:
    try:
        while True:
            finished = job.done
            while True:
                try:
                    view.event(events.get_nowait())
                except queue.Empty:
                    break
            for name, line in follower.poll(job.log_paths()):
                view.log(name, line)
            if finished:
                for name, line in follower.flush():
                    view.log(name, line)
                view.refresh(job)
                break
            view.refresh(job)
            time.sleep(interval_s)
    finally:
        view.stop()


@dataclass
class LocalTuningRun:
    """A tuning template's trials running here: `snapshot()` while it runs, `summary()` once it has ended."""

    backend: LocalBackend
    name: str
    run_dir: Path
    metric: str  # the study's objective
    parameters: list[str]  # the parameters' ids, in the template's order
    warning: str | None = None  # what to say once as the run starts (no /gcs for the trials, say)

    def _loop(self) -> tuple[TuningRun, threading.Thread]:
        return self.backend.tuning.run(self.name)

    def snapshot(self) -> Snapshot:
        return self._loop()[0].snapshot()

    def cancel(self) -> None:
        """Stop every trial; returns at once (`wait` until they are gone)."""
        self.backend.cancel(self.name)

    def wait(self, timeout: float | None = None) -> bool:
        """Whether the run has ended (every trial stopped, the summary written) within `timeout`."""
        thread = self._loop()[1]
        thread.join(timeout)
        return not thread.is_alive()

    def summary(self) -> dict[str, Any]:
        import json

        from vertexdist.backends.local.tuning import SUMMARY

        return dict(json.loads((self.run_dir / SUMMARY).read_text()))


def start_local_tuning(request: LocalRunRequest) -> LocalTuningRun:
    """Package the tuning template and start its study; the trials run as local jobs."""
    from vertexdist.backends.local.tuning import LocalTuningRequest

    backend = local_backend(request)
    options = SubmitOptions(resume_from=request.resume_from)
    dry = backend.dryrun(_template(request), options)
    assert isinstance(dry, LocalTuningRequest)
    name = backend.schedule(dry, options)
    return LocalTuningRun(
        backend,
        name,
        dry.run_dir,
        metric=dry.job.study.objective.id,
        parameters=[p.id for p in dry.job.study.parameters],
        warning=backend.tuning.gcs_warning(),
    )
