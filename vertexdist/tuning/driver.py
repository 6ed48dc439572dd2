"""The loop that runs a study: start the trials it asks for through a launcher, read each trial's metric file
into measurements, stop the trials it says to stop, settle the ones that end, until the job is done.

One loop for both places trials run: `local-run` (trials as local jobs, `backends.local.trials`) and the
emulator (trials as CustomJobs it runs, `emulator.vertex.tuning`). Cancelling stops every running trial and
waits for them; whatever ends the loop, no trial is left running.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from vertexdist.tuning.hypertune import ReportLog
from vertexdist.tuning.study import JobOutcome, Study, TrialRecord
from vertexdist.wire.proto_json import now_rfc3339
from vertexdist.wire.trials import Trial

DEFAULT_POLL_S = 0.1
STOP_WAIT_S = 30.0


@dataclass(frozen=True)
class TrialEnd:
    succeeded: bool
    message: str = ""


def metric_file_text(path: Path) -> str:
    """A trial's cloudml-hypertune metric file as it is now: "" before the first report (no file yet), or
    if it cannot be read; bytes that are not UTF-8 (a torn write) replaced, for `hypertune` to skip."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


class TrialHandle(Protocol):
    custom_job: str | None

    def poll(self) -> TrialEnd | None:
        """None while the trial's job runs; how it ended once it has."""
        ...

    def metrics_text(self) -> str:
        """The trial's cloudml-hypertune metric file as it is now ("" before the first report)."""
        ...

    def stop(self) -> None:
        """Ask the trial's job to stop (returns at once)."""
        ...

    def wait(self, timeout: float) -> bool:
        """Block until the trial's processes are gone (True) or `timeout` passes."""
        ...


class TrialLauncher(Protocol):
    def start(self, trial: TrialRecord) -> TrialHandle: ...


@dataclass(frozen=True)
class Snapshot:
    """The study as the views show it, read under the loop's lock."""

    trials: tuple[Trial, ...]
    outcome: JobOutcome
    message: str
    best: str | None
    stopped_early: frozenset[str]


class TuningRun:
    def __init__(
        self,
        study: Study,
        launcher: TrialLauncher,
        *,
        poll_s: float = DEFAULT_POLL_S,
        on_change: Callable[[TuningRun], None] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        import time

        self.study = study
        self._launcher = launcher
        self._poll_s = poll_s
        self._on_change = on_change
        self._clock = clock or time.time
        self._cancel = threading.Event()
        self._wake = threading.Event()
        self.lock = threading.RLock()
        self.started_time: str | None = None
        self._handles: dict[str, tuple[TrialHandle, ReportLog, float]] = {}

    def cancel(self) -> None:
        """Stop the job: no new trials, every running one stopped; thread-safe, returns at once."""
        self._cancel.set()
        self._wake.set()

    def snapshot(self) -> Snapshot:
        with self.lock:
            outcome, message = self.study.outcome()
            best = self.study.best()
            return Snapshot(
                trials=tuple(self.study.wire_trials()),
                outcome=outcome,
                message=message,
                best=best.id if best else None,
                stopped_early=frozenset(t.id for t in self.study.trials.values() if t.stopped_early),
            )

    def run(self) -> tuple[JobOutcome, str]:
        """Run the study to its end (blocking); the job's outcome and, when it did not succeed, why."""
        try:
            while True:
                with self.lock:
                    changed = self._step()
                if changed and self._on_change is not None:
                    self._on_change(self)
                with self.lock:
                    if self.study.done and not self._handles:
                        return self.study.outcome()
                self._wake.wait(self._poll_s)
                self._wake.clear()
        finally:
            self._stop_every_trial()

    def _step(self) -> bool:
        study, changed = self.study, False
        if self._cancel.is_set() and not study.cancelled:
            self._stop(study.cancel())
            changed = True
        for trial in study.next_trials():
            changed = True
            self.started_time = self.started_time or now_rfc3339()
            try:
                handle = self._launcher.start(trial)
            except Exception as exc:  # a trial that cannot start is a failed trial, not a dead loop
                message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
                study.finish(trial.id, succeeded=False, message=f"the trial could not start: {message}")
                continue
            trial.custom_job = handle.custom_job
            self._handles[trial.id] = (handle, ReportLog(), self._clock())
        for trial_id, (handle, log, started) in list(self._handles.items()):
            end = handle.poll()  # before reading the file: a trial that has ended has written all of it
            if log.add(handle.metrics_text()):
                changed = True
                if end is None and study.record(trial_id, log.measurements(started)):
                    handle.stop()
            if end is not None:
                # The last reports count, but no stopping decision on a trial that has already ended.
                study.trials[trial_id].measurements = log.measurements(started)
                study.finish(trial_id, succeeded=end.succeeded, message=end.message)
                del self._handles[trial_id]
                changed = True
        if study.failure is not None and self._stop(study.stop_all()):
            changed = True
        return changed

    def _stop(self, trials: list[TrialRecord]) -> list[TrialRecord]:
        for trial in trials:
            found = self._handles.get(trial.id)
            if found is not None:
                found[0].stop()
        return trials

    def _stop_every_trial(self) -> None:
        with self.lock:
            handles = [h for h, _, _ in self._handles.values()]
        for handle in handles:
            handle.stop()
        for handle in handles:
            handle.wait(STOP_WAIT_S)
