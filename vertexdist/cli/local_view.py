"""What `local-run` shows while a job runs: a rich live table on a terminal, prefixed log lines otherwise,
or JSON event lines (`--json`) for scripts, fed by the local backend's events and log files. Every replica's
full log stays in its file; views only tail them.
"""

from __future__ import annotations

import json
import queue
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from vertexdist.local.logs import LogFollower
from vertexdist.local.runner import JobEvent, JobResult, LocalJob, ReplicaState


def _event_dict(job_id: str, event: JobEvent) -> dict[str, Any]:
    if event.replica is not None:
        r = event.replica
        return {
            "event": "replica",
            "job_id": job_id,
            "time": event.time,
            "replica": r.name,
            "state": r.state.value,
            "pid": r.pid,
            "exit_code": r.exit_code,
            "attempt": r.attempt,
        }
    out: dict[str, Any] = {
        "event": "job",
        "job_id": job_id,
        "time": event.time,
        "state": event.job_state.value,
    }
    if event.message:
        out["message"] = event.message
    if event.error is not None:
        out["error"] = {
            "code": event.error.code,
            "message": event.error.message,
            "replica": event.error.replica,
        }
    return out


class View:
    """Base: receives events and log lines from the follow loop; prints nothing."""

    def start(self) -> None:
        pass

    def event(self, event: JobEvent) -> None:
        pass

    def log(self, replica: str, line: str) -> None:
        pass

    def refresh(self, job: LocalJob) -> None:
        pass

    def stop(self) -> None:
        pass


class PrefixedView(View):
    """`workerpool1-0 | line` for every log line, and one `vertexdist |` line per state change."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._width = len("workerpool0-0")

    def _line(self, who: str, text: str) -> None:
        self._width = max(self._width, len(who))
        self._out.write(f"{who:<{self._width}} | {text}\n")
        self._out.flush()

    def event(self, event: JobEvent) -> None:
        if event.replica is None:
            self._line("vertexdist", event.message or f"job {event.job_state.value}")
        elif event.replica.state not in (ReplicaState.RUNNING, ReplicaState.PENDING):
            r = event.replica
            self._line("vertexdist", f"{r.name} {r.state.value} (exit code {r.exit_code})")
        elif event.replica.state is ReplicaState.RUNNING:
            self._line("vertexdist", f"{event.replica.name} started, pid {event.replica.pid}")

    def log(self, replica: str, line: str) -> None:
        self._line(replica, line)


class JsonView(View):
    """One JSON object per line: job and replica state changes, and log lines."""

    def __init__(self, out: IO[str], job_id: str) -> None:
        self._out = out
        self._job_id = job_id

    def _write(self, obj: dict[str, Any]) -> None:
        self._out.write(json.dumps(obj) + "\n")
        self._out.flush()

    def event(self, event: JobEvent) -> None:
        self._write(_event_dict(self._job_id, event))

    def log(self, replica: str, line: str) -> None:
        self._write({"event": "log", "job_id": self._job_id, "replica": replica, "line": line})


def follow(
    job: LocalJob,
    view: View,
    events: queue.Queue[JobEvent],
    *,
    interval_s: float = 0.1,
    mask: Callable[[str], str] = lambda line: line,
) -> JobResult:
    """Feed `view` with the job's events and new log lines (each through `mask`) until the job is done.

    If the view fails (stdout closed under `local-run ... | head`, say), the job is cancelled and waited for
    before the error goes on: its replicas run in their own sessions and would otherwise outlive local-run.
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


class _Masked(View):
    """A view whose log lines have the job's secret values masked, as `vertexdist logs` masks them."""

    def __init__(self, view: View, mask: Callable[[str], str]) -> None:
        self._view = view
        self._mask = mask

    def start(self) -> None:
        self._view.start()

    def event(self, event: JobEvent) -> None:
        self._view.event(event)

    def log(self, replica: str, line: str) -> None:
        self._view.log(replica, self._mask(line))

    def refresh(self, job: LocalJob) -> None:
        self._view.refresh(job)

    def stop(self) -> None:
        self._view.stop()


def _follow(
    job: LocalJob, view: View, events: queue.Queue[JobEvent], follower: LogFollower, interval_s: float
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


def choose_view(job_id: str, run_dir: Path, *, json_events: bool, out: IO[str] | None = None) -> View:
    stream = out or sys.stdout
    if json_events:
        return JsonView(stream, job_id)
    if stream.isatty():
        from vertexdist.cli.local_live import LiveView

        return LiveView(job_id, run_dir)
    return PrefixedView(stream)
