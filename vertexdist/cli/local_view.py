"""What `local-run` shows while a job runs: a rich live table on a terminal, prefixed log lines otherwise,
or JSON event lines (`--json`) for scripts (both without terminal codes: `plain_text`), fed by the local
backend's events and log files. Every replica's full log stays in its file; views only tail them. The follow
loop that feeds them is the service's (`vertexdist.jobs.local_run.follow_local`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from vertexdist.backends.base import JobEvent, JobHandle, ReplicaState
from vertexdist.cli.plain_text import plain

if TYPE_CHECKING:
    from vertexdist.cli.local_live import LiveView


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
            "restarts": r.restarts,
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
    """Base: receives events and log lines from the follow loop (`jobs.local_run.follow_local`); prints
    nothing."""

    def start(self) -> None:
        pass

    def event(self, event: JobEvent) -> None:
        pass

    def log(self, replica: str, line: str) -> None:
        pass

    def refresh(self, job: JobHandle) -> None:
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
        self._line(replica, plain(line))


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
        self._write({"event": "log", "job_id": self._job_id, "replica": replica, "line": plain(line)})


def choose_view(
    job_id: str, run_dir: Path, *, json_events: bool, out: IO[str] | None = None
) -> View | LiveView:
    stream = out or sys.stdout
    if json_events:
        return JsonView(stream, job_id)
    if stream.isatty():
        from vertexdist.cli.local_live import LiveView

        return LiveView(job_id, run_dir)
    return PrefixedView(stream)
