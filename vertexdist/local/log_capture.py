"""A replica's stdout and stderr into its one log file, noting which stream each piece came from, and when.

Vertex logs a replica's stdout as INFO and its stderr as ERROR (a tqdm bar on stderr shows as ERROR:
GoogleCloudPlatform/vertex-ai-samples#242; a real `ml_job` entry with `"severity": "ERROR"` for a stderr line:
GoogleCloudPlatform/cortex-data-foundation#42). To serve the same severities, the runner cannot hand the child
one file for both streams, so each replica gets two pipes and one thread that copies them:

- `logs/workerpool0-0.log` stays what it was, both streams merged in arrival order (what users read, what
  the live view tails); whole lines are written, so a stdout line and a stderr line never mix mid-line, and a
  partial line (a progress bar, a prompt) goes out once its stream has been quiet for `FLUSH_S`.
- beside it, `workerpool0-0.log.index` gets one line per write, before the write: `OFFSET STREAM UNIX_NS`
  (`o` stdout, `e` stderr, `OFFSET` where the write starts in the log, `UNIX_NS` when its first byte
  arrived). That is
  what `log_records` turns into per-line severity and time, for `vertexdist logs` and the emulator's
  Cloud Logging; it costs one short line per write, not per log line.
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


class _Pending:
    """Bytes of one stream not yet written (no newline yet), and when the first of them arrived."""

    def __init__(self) -> None:
        self.data = b""
        self.since_ns = 0
        self.last = 0.0


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

    def note(self, text: str) -> None:
        """A line of the runner's own (a restart marker) into the log, as stdout."""
        with self._lock:
            self._write(STDOUT, text.encode() + b"\n", time.time_ns())

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
        pending = {STDOUT: _Pending(), STDERR: _Pending()}
        try:
            selector.register(self._out_read, selectors.EVENT_READ, STDOUT)
            selector.register(self._err_read, selectors.EVENT_READ, STDERR)
            while selector.get_map():
                waiting = any(p.data for p in pending.values())
                for key, _ in selector.select(FLUSH_S if waiting else None):
                    stream: str = key.data
                    data = os.read(key.fd, READ_BYTES)
                    if not data:
                        selector.unregister(key.fd)
                        os.close(key.fd)
                        self._flush(stream, pending[stream])
                        continue
                    self._take(stream, pending[stream], data)
                quiet_since = time.monotonic() - FLUSH_S
                for stream, part in pending.items():
                    if part.data and part.last <= quiet_since:
                        self._flush(stream, part)
        except OSError:
            pass  # the log cannot be written (disk full, folder gone): the process must not block on it
        finally:
            selector.close()
            self._close_files()
            self._done.set()

    def _take(self, stream: str, part: _Pending, data: bytes) -> None:
        now = time.time_ns()
        if not part.data:
            part.since_ns = now
        part.data += data
        part.last = time.monotonic()
        cut = part.data.rfind(b"\n") + 1
        if len(part.data) > MAX_PENDING:
            cut = len(part.data)
        if cut:
            with self._lock:
                self._write(stream, part.data[:cut], part.since_ns)
            part.data = part.data[cut:]
            part.since_ns = now

    def _flush(self, stream: str, part: _Pending) -> None:
        if part.data:
            with self._lock:
                self._write(stream, part.data, part.since_ns)
            part.data = b""

    def _write(self, stream: str, data: bytes, since_ns: int) -> None:
        offset = os.fstat(self._log).st_size  # O_APPEND: the write lands at the end
        # The index line first: a reader that sees these bytes in the log has their stream and time already.
        os.write(self._index, f"{offset} {stream} {since_ns}\n".encode())
        view = memoryview(data)
        while view:
            view = view[os.write(self._log, view) :]

    def _close_files(self) -> None:
        with self._lock:
            files, self._files_open = self._files_open, False
        if files:  # once only: a closed descriptor's number may already belong to another file
            for fd in (self._log, self._index):
                with contextlib.suppress(OSError):
                    os.close(fd)
