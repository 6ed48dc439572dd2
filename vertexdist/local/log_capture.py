"""A replica's stdout and stderr into its one log file, noting which stream each piece came from, and when.

Vertex logs a replica's stdout as INFO and its stderr as ERROR (a tqdm bar on stderr shows as ERROR:
GoogleCloudPlatform/vertex-ai-samples#242; a real `ml_job` entry with `"severity": "ERROR"` for a stderr line:
GoogleCloudPlatform/cortex-data-foundation#42). To serve the same severities, the runner cannot hand the child
one file for both streams, so each replica gets two pipes and one thread that copies them:

- `logs/workerpool0-0.log` stays what it was, both streams merged in arrival order (what users read, what
  the live view tails); whole lines are written, so a stdout line and a stderr line never mix mid-line, and a
  partial line (a progress bar, a prompt) goes out once its stream has been quiet for `FLUSH_S`.
- beside it, `workerpool0-0.log.index` gets a line per piece written, before it: `OFFSET STREAM UNIX_NS`
  (`o` stdout, `e` stderr, `OFFSET` where the piece starts in the log, `UNIX_NS` when its first byte
  arrived). That is what `log_records` turns into per-line severity and time, for `vertexdist logs` and
  the emulator's Cloud Logging; it costs one short line per piece (a burst of lines), not per log line.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
import time
from pathlib import Path

INDEX_SUFFIX = ".index"
STDOUT, STDERR = "o", "e"
FLUSH_S = 0.1
READ_BYTES = 1 << 16
# A "line" that grows past this without a newline is written as it is (a binary dump, a huge progress line).
MAX_PENDING = 1 << 20
_FILE_MODE = 0o600


def index_path(log_path: Path) -> Path:
    return log_path.with_name(log_path.name + INDEX_SUFFIX)


Segment = tuple[str, bytes, int]  # (stream, bytes, arrival ns of the first of them)


class _Pending:
    """Bytes of one stream not yet written (no newline yet), and when the first of them arrived."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.data = b""
        self.since_ns = 0
        self.last = 0.0

    def add(self, data: bytes) -> list[Segment]:
        """The complete lines now ready (all of it past MAX_PENDING); the rest waits."""
        now = time.time_ns()
        if not self.data:
            self.since_ns = now
        self.data += data
        self.last = time.monotonic()
        cut = len(self.data) if len(self.data) > MAX_PENDING else self.data.rfind(b"\n") + 1
        if not cut:
            return []
        ready = [(self.stream, self.data[:cut], self.since_ns)]
        self.data = self.data[cut:]
        self.since_ns = now
        return ready

    def take_all(self) -> list[Segment]:
        ready = [(self.stream, self.data, self.since_ns)] if self.data else []
        self.data = b""
        return ready


class LogCapture:
    """Two pipes for one replica process (`stdout`, `stderr`: pass them to Popen), copied into its log.

    `start()` once the process runs (it closes this side's copies of the child's ends, so the copy ends when
    every process holding them is gone); `abandon()` if it never started; `wait()` for the copy to finish.
    """

    def __init__(self, log_path: Path) -> None:
        self._log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, _FILE_MODE)
        self._index = os.open(index_path(log_path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, _FILE_MODE)
        self._out_read, self.stdout = os.pipe()
        self._err_read, self.stderr = os.pipe()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._files_open = True
        self._broken = False

    def note(self, text: str) -> None:
        """A line of the runner's own (a restart marker) into the log, as stdout."""
        self._write([(STDOUT, text.encode() + b"\n", time.time_ns())])

    def start(self, name: str) -> None:
        os.close(self.stdout)
        os.close(self.stderr)
        threading.Thread(target=self._copy, name=f"log-{name}", daemon=True).start()

    def abandon(self) -> None:
        for fd in (self.stdout, self.stderr, self._out_read, self._err_read):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._close_files()

    def wait(self, timeout: float) -> bool:
        """True once everything the process wrote is in the log (its pipes closed)."""
        return self._done.wait(timeout)

    def _copy(self) -> None:
        selector = selectors.DefaultSelector()
        pending = {STDOUT: _Pending(STDOUT), STDERR: _Pending(STDERR)}
        try:
            selector.register(self._out_read, selectors.EVENT_READ, STDOUT)
            selector.register(self._err_read, selectors.EVENT_READ, STDERR)
            while selector.get_map():
                waiting = any(p.data for p in pending.values())
                ready: list[Segment] = []
                for key, _ in selector.select(FLUSH_S if waiting else None):
                    part = pending[key.data]
                    data = os.read(key.fd, READ_BYTES)
                    if data:
                        ready += part.add(data)
                    else:
                        selector.unregister(key.fd)
                        os.close(key.fd)
                        ready += part.take_all()
                quiet_since = time.monotonic() - FLUSH_S
                for part in pending.values():
                    if part.data and part.last <= quiet_since:
                        ready += part.take_all()
                if ready:
                    self._write(ready)
        finally:
            for key in list(selector.get_map().values()):  # a read failed: never leave a writer blocked
                with contextlib.suppress(OSError):
                    os.close(key.fd)
            selector.close()
            self._close_files()
            self._done.set()

    def _write(self, segments: list[Segment]) -> None:
        """One index write, then one log write, for everything ready (few system calls per chatty burst)."""
        with self._lock:
            if self._broken or not self._files_open:
                return
            marks = []
            try:
                # O_APPEND: the write lands at the end (another attempt's capture may still be writing too).
                offset = os.fstat(self._log).st_size
                for stream, data, since_ns in segments:
                    marks.append(f"{offset} {stream} {since_ns}\n")
                    offset += len(data)
                # The index first: a reader that sees these bytes in the log has their stream and time.
                os.write(self._index, "".join(marks).encode())
                view = memoryview(b"".join(data for _, data, _ in segments))
                while view:
                    view = view[os.write(self._log, view) :]
            except OSError:
                # Disk full, folder gone: keep draining the pipes, a replica must never block on its log.
                self._broken = True

    def _close_files(self) -> None:
        with self._lock:
            files, self._files_open = self._files_open, False
        if files:  # once only: a closed descriptor's number may already belong to another file
            for fd in (self._log, self._index):
                with contextlib.suppress(OSError):
                    os.close(fd)
