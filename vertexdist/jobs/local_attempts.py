"""The managed-job controller's attempts on this machine (`local-run` of a template with `recovery:`).

Each attempt is a local run started through the service (`jobs.local_run.start_local`), with the flags the
managed job was recorded with. Just before an attempt's job starts, its run folder gets `managed.json`
naming the attempt's label, so a controller killed between that create and its own record finds the job
(`find`) instead of starting a second one. Every attempt after the first continues the first attempt's run
(the `--resume-from` machinery: the same gs:// folder, so `AIP_CHECKPOINT_DIR` is the same); `CreatedJob`'s
`output_dir` is therefore the attempt's run folder, which is what `--resume-from` takes.

A local job runs inside the process that started it, and dies with it (`local.watchdog`): a job this process
did not start whose run folder has not ended was lost with its supervisor (the controller was killed), and
reads as FAILED with `LOST_MESSAGE`, which `managed.reasons` reads as TRANSIENT: the next attempt continues
from the checkpoints it left.
"""

from __future__ import annotations

import dataclasses
import json
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertexdist.backends.base import JobEvent, JobStatus
from vertexdist.jobs.local_run import RUNS_DIR, LocalRun, LocalRunRequest, start_local
from vertexdist.managed.attempts import CreatedJob, labelled
from vertexdist.managed.reasons import LOST_MESSAGE
from vertexdist.private_files import write_private_json

if TYPE_CHECKING:
    from vertexdist.jobs.attempt_pool import AttemptPool
    from vertexdist.jobs.local_faults import LocalFaults
    from vertexdist.spec.models import JobTemplate

MARKER = "managed.json"
POOL_WAIT_S = 60.0
WARM_NOTE = "this attempt's replicas start warm, forked from the managed run's own warm pool"


@dataclass(frozen=True)
class LocalPlace:
    """How each attempt runs here: the `local-run` flags the managed job was recorded with."""

    runs_dir: str = str(RUNS_DIR)
    procs_per_replica: int | None = None
    docker: bool = False
    warm: bool = False
    grace_s: float = 5.0
    timeout_s: float | None = None

    @classmethod
    def from_target(cls, target: Mapping[str, Any]) -> LocalPlace:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in target.items() if k in names})


@dataclass
class LocalAttempts:
    """Attempts as local runs; `faults` (a `--fault-plan`) applies to every attempt this process starts,
    each fault's `times` counted across them, as the emulator counts its jobs."""

    place: LocalPlace = field(default_factory=LocalPlace)
    faults: LocalFaults | None = None
    # Called with each attempt this process starts and the queue of its job's events (a live view's feed).
    on_run: Callable[[LocalRun, queue.Queue[JobEvent]], None] | None = None
    # The controller's warm pool (`jobs.attempt_pool`): an attempt made once it answers forks from it.
    pool: AttemptPool | None = None
    _runs: dict[str, LocalRun] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _stopping: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def runs_dir(self) -> Path:
        return Path(self.place.runs_dir)

    def create(self, template: JobTemplate, label: str, resume_from: str | None) -> CreatedJob:
        request = LocalRunRequest(
            labelled(template, label),
            runs_dir=self.runs_dir,
            procs_per_replica=self.place.procs_per_replica,
            docker=self.place.docker,
            resume_from=resume_from,
            timeout_s=self.place.timeout_s,
            grace_s=self.place.grace_s,
            warm=self.place.warm,
            warm_socket=self._warm_socket(resume_from),
            faults=self.faults,
        )

        def mark(run_dir: Path) -> None:
            write_private_json(run_dir / MARKER, {"label": label})

        events: queue.Queue[JobEvent] = queue.Queue()
        run = start_local(request, before_start=mark, on_event=events.put if self.on_run else None)
        with self._lock:
            self._runs[run.name] = run
        if self.on_run is not None:
            self.on_run(run, events)
        if request.warm_socket is not None:
            run.backend.job(run.name).note(f"{WARM_NOTE} (torch and the trainer already imported)")
        if self._stopping.is_set():  # interrupted while this attempt was being made
            run.job.cancel()
        return CreatedJob(run.name, str(run.run_dir))

    def _warm_socket(self, resume_from: str | None) -> Path | None:
        """The controller's pool for this attempt, if it has one that answers (`jobs.attempt_pool`). A
        recovery (an attempt that resumes) waits for the pool the first attempt started, at most
        `POOL_WAIT_S`: what it has left of its imports is less than a cold start's."""
        if self.pool is None or self.place.warm:
            return None
        if resume_from is not None:
            self.pool.wait_ready(POOL_WAIT_S)
        return self.pool.socket()

    def find(self, template: JobTemplate, label: str) -> CreatedJob | None:
        if not self.runs_dir.is_dir():
            return None
        for marker in sorted(self.runs_dir.glob(f"*/{MARKER}")):
            run_dir = marker.parent
            try:
                found = json.loads(marker.read_text()).get("label")
            except (OSError, ValueError, AttributeError):
                continue
            if found == label and (run_dir / "job.json").is_file():
                return CreatedJob(run_dir.name, str(run_dir.resolve()))
        return None

    def describe(self, template: JobTemplate, name: str) -> JobStatus:
        with self._lock:
            run = self._runs.get(name)
        if run is not None:
            return run.backend.describe(name)
        from vertexdist.backends import create_backend
        from vertexdist.backends.local.prepare import LocalOptions

        status = create_backend("local", LocalOptions(runs_dir=self.runs_dir)).describe(name)
        if status.done:
            return status
        return dataclasses.replace(status, state="FAILED", error=LOST_MESSAGE)

    def cancel(self, template: JobTemplate, name: str) -> None:
        with self._lock:
            run = self._runs.get(name)
        if run is not None:  # a job this process did not start is already gone with its supervisor
            run.job.cancel()

    def interrupt(self) -> None:
        """Ctrl-C: cancel every attempt this process started, and any it is starting now."""
        self._stopping.set()
        with self._lock:
            runs = list(self._runs.values())
        for run in runs:
            run.job.cancel()

    def wait(self) -> None:
        """Until every attempt this process started has stopped (its summary written)."""
        with self._lock:
            runs = list(self._runs.values())
        for run in runs:
            run.job.wait()

    def summary(self, name: str) -> dict[str, Any] | None:
        """A finished attempt's summary (its run folder's summary.json), if this process started it."""
        with self._lock:
            run = self._runs.get(name)
        return run.summary() if run is not None else None
