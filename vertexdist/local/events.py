"""A local job's state changes, one JSON object a line in its run folder's `events.jsonl`, as they happen.

The job's own process knows its replicas' states; another process (`vertexdist ui`, `status`) learns them
from this file: the job's state timeline, each replica's latest state and exit code, while the job runs and
after. Written by the supervisor thread (`launch.schedule`), appended whole lines at a time (mode 0600, the
run folder's rule), read back by `read_events`, which skips a line cut short by a crash.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vertexdist.local.runner import JobEvent
from vertexdist.private_files import make_private_dir, open_private

EVENTS = "events.jsonl"


@dataclass(frozen=True)
class RecordedEvent:
    """One line of `events.jsonl`: the job's state, and the replica that changed (None: the job did)."""

    time: float  # seconds since the epoch
    job_state: str  # JOB_STATE_RUNNING ...
    replica: str | None = None
    replica_state: str | None = None  # PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED
    exit_code: int | None = None
    attempt: int = 0
    message: str = ""


def event_line(event: JobEvent) -> str:
    replica = event.replica
    record: dict[str, object] = {"time": round(event.time, 6), "job_state": event.job_state.value}
    if replica is not None:
        record |= {"replica": replica.name, "replica_state": replica.state.value, "attempt": replica.attempt}
        if replica.exit_code is not None:
            record["exit_code"] = replica.exit_code
        if replica.restarts:
            record["restarts"] = replica.restarts
    message = event.message or (event.error.message if event.error is not None else "")
    if message:
        record["message"] = message
    return json.dumps(record, separators=(",", ":")) + "\n"


def recorder(run_dir: Path, then: Callable[[JobEvent], None] | None = None) -> Callable[[JobEvent], None]:
    """An `on_event` that appends each event to `<run_dir>/events.jsonl`, then calls `then`."""
    lock = threading.Lock()
    path = Path(run_dir) / EVENTS

    def record(event: JobEvent) -> None:
        data = event_line(event).encode()
        with lock:
            if not path.parent.is_dir():
                make_private_dir(path.parent)
            fd = open_private(path, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, data)  # one write of a whole line: a reader never sees half of one
            finally:
                os.close(fd)
        if then is not None:
            then(event)

    return record


def _event(raw: object) -> RecordedEvent | None:
    if not isinstance(raw, dict):
        return None
    try:
        exit_code = raw.get("exit_code")
        return RecordedEvent(
            time=float(raw["time"]),
            job_state=str(raw["job_state"]),
            replica=str(raw["replica"]) if raw.get("replica") is not None else None,
            replica_state=str(raw["replica_state"]) if raw.get("replica_state") is not None else None,
            exit_code=int(exit_code) if exit_code is not None else None,
            attempt=int(raw.get("attempt") or 0),
            message=str(raw.get("message") or ""),
        )
    except (KeyError, TypeError, ValueError):
        return None


def read_events(run_dir: Path) -> list[RecordedEvent]:
    """The events recorded for the job in `run_dir`, oldest first ([] when none were)."""
    try:
        text = (Path(run_dir) / EVENTS).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        try:
            event = _event(json.loads(line))
        except ValueError:
            continue  # a line cut short
        if event is not None:
            found.append(event)
    return found
