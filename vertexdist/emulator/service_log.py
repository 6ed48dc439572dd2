"""An emulator job's own log lines, beside its replicas': `logs/service.log`, served by Cloud Logging as the
entries of task `service`.

Vertex writes lines of its own into a job's log, beside the replicas' (the `service` task: provisioning,
restarts). The emulator's job runner has lines of that kind too: what the local runtime says about a job
from outside its replicas, such as the health monitor's note on a job that printed nothing and made no step
for `health.silence` (`vertexdist.health.silence`), a straggler warning, a hang verdict, or a restart. They
go into this file, in the replicas' log format (`local.log_capture`: the text, and an index region with the
time it was written), so `submit --follow`, `vertexdist logs` and the console's logs show them as lines of
task `service`, in time order with the replicas' lines.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

from vertexdist.backends.base import JobEvent
from vertexdist.local.log_capture import STDOUT, index_path

SERVICE_TASK = "service"
_FILE_MODE = 0o600


def service_log_path(run_dir: Path) -> Path:
    return Path(run_dir) / "logs" / f"{SERVICE_TASK}.log"


class ServiceLog:
    """An `on_event` for the local runtime: every job-level event with a message of its own becomes a line
    (a job's error is its resource's `error`, not repeated here). Never raises: a job goes on without it."""

    def __init__(self, run_dir: Path) -> None:
        self.path = service_log_path(run_dir)
        self._lock = threading.Lock()

    def __call__(self, event: JobEvent) -> None:
        if event.replica is None and event.message:
            self.write(event.message)

    def write(self, message: str) -> None:
        # One entry per line; control characters stay as they are (readers strip them when they print).
        data = "".join(line + "\n" for line in message.splitlines() if line.strip()).encode()
        if not data:
            return
        with self._lock, contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
            index = os.open(index_path(self.path), flags, _FILE_MODE)  # before the log: readers wait on it
            try:
                log = os.open(self.path, flags, _FILE_MODE)
                try:
                    stamp = time.time_ns()
                    start = os.fstat(log).st_size
                    os.write(log, data)
                    os.write(index, f"{STDOUT} {start} {start + len(data)} {stamp}\n".encode())
                finally:
                    os.close(log)
            finally:
                os.close(index)
