"""A replica's stdout and stderr into its one log file, noting which bytes came from which, and when.

Vertex logs a replica's stdout as INFO and its stderr as ERROR (a tqdm bar on stderr shows as ERROR:
GoogleCloudPlatform/vertex-ai-samples#242; a real `ml_job` entry with `"severity": "ERROR"` for a stderr line:
GoogleCloudPlatform/cortex-data-foundation#42). The log stays one merged file in arrival order (what users
read, what the live view tails), and what tells the streams apart costs stdout nothing:

- stdout goes straight into `logs/workerpool0-0.log`, as before. (Through a pipe, every write wakes a reader,
  and two workers of one replica printing at once then split each other's lines: a print is two writes.)
- stderr goes through a pipe and one thread, which writes it into the same file in whole lines (a partial
  line once stderr has been quiet for `FLUSH_S`), between stdout's lines: it waits until the file ends
  with a newline and has not grown for `QUIET_S` (a print's text and newline are two writes), at most
  `LINE_WAIT_S`, so a stderr line may trail stdout lines printed just after it: by that much when its
  thread gets a core at once, longer on a loaded machine (no order holds across the two streams). It
  knows exactly where each piece landed (O_APPEND, then the descriptor's offset).
- `workerpool0-0.log.index` says which: a line `STREAM START END UNIX_NS` per region, in file order: `e` for
  a stderr piece the thread wrote, `o` for stdout bytes the thread saw appear (it looks every `FLUSH_S`, and
  before each stderr write), with the time it saw them. Bytes in no region are stdout (written between a
  look and a stderr write); a line whose start lies before the last region's END can be told apart for good.
  `log_records` reads both files; stdout times are when the thread saw them (within `FLUSH_S`, or at the
  next stderr write), stderr times when they arrived.
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
LINE_WAIT_S = 0.05
QUIET_S = 0.0002
READ_BYTES = 1 << 16
# A "line" that grows past this without a newline is written as it is (a binary dump, a huge progress line).
MAX_PENDING = 1 << 20
_FILE_MODE = 0o600


def index_path(log_path: Path) -> Path:
    return log_path.with_name(log_path.name + INDEX_SUFFIX)


class LogCapture:
    """The stderr pipe of one replica process (pass `stderr` to Popen; stdout is the log file itself).

    `start()` once the process runs (it closes this side's copy of the child's end, so the copy ends when
    every process holding it is gone); `abandon()` if it never started; `wait()` for the copy to finish.
    """

    def __init__(self, log_path: Path) -> None:
        self._log = os.open(log_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, _FILE_MODE)
        self._index = os.open(index_path(log_path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, _FILE_MODE)
        self._err_read, self.stderr = os.pipe()
        self._seen = os.fstat(self._log).st_size  # bytes of the log already in a region (or from before)
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._files_open = True
        self._broken = False

    def note(self, text: str) -> None:
        """A line of the runner's own (a restart marker) into the log, as stdout."""
        with self._lock:
            self._look()
            self._append(STDOUT, text.encode() + b"\n", time.time_ns())

    def start(self, name: str) -> None:
        os.close(self.stderr)
        threading.Thread(target=self._copy, name=f"log-{name}", daemon=True).start()

    def abandon(self) -> None:
        for fd in (self.stderr, self._err_read):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._close_files()

    def wait(self, timeout: float) -> bool:
        """True once everything the process wrote to stderr is in the log (its pipe closed)."""
        return self._done.wait(timeout)

    def _copy(self) -> None:
        selector = selectors.DefaultSelector()
        pending, since_ns, last = b"", 0, 0.0
        try:
            selector.register(self._err_read, selectors.EVENT_READ)
            open_ = True
            while open_:
                if selector.select(FLUSH_S):
                    data = os.read(self._err_read, READ_BYTES)
                    if not data:
                        open_ = False
                    else:
                        if not pending:
                            since_ns = time.time_ns()
                        pending += data
                        last = time.monotonic()
                cut = pending.rfind(b"\n") + 1
                if (
                    not open_
                    or len(pending) > MAX_PENDING
                    or (pending and time.monotonic() - last >= FLUSH_S)
                ):
                    cut = len(pending)  # the last of it, a long partial line, or one its stream left hanging
                with self._lock:
                    self._look()
                    if cut:
                        self._append(STDERR, pending[:cut], since_ns)
                        pending, since_ns = pending[cut:], time.time_ns()
            with self._lock:
                self._look()  # what stdout wrote last
        finally:
            selector.close()
            with contextlib.suppress(OSError):
                os.close(self._err_read)  # a failed read never leaves a writer blocked on a full pipe
            self._close_files()
            self._done.set()

    def _look(self) -> None:
        """Bytes that appeared since the last region are stdout's: a region for them, seen now."""
        if self._broken or not self._files_open:
            return
        try:
            size = os.fstat(self._log).st_size
            if size > self._seen:
                os.write(self._index, f"{STDOUT} {self._seen} {size} {time.time_ns()}\n".encode())
                self._seen = size
        except OSError:
            self._broken = True

    def _between_lines(self) -> bool:
        """Whether stdout is between lines: it ends with a newline and did not grow for a moment (a print
        is two writes, microseconds apart: text, then newline)."""
        size = os.fstat(self._log).st_size
        if size and os.pread(self._log, 1, size - 1) != b"\n":
            return False
        time.sleep(QUIET_S)
        return os.fstat(self._log).st_size == size

    def _append(self, stream: str, data: bytes, since_ns: int) -> None:
        if self._broken or not self._files_open:
            return
        try:
            # A stdout line being printed (its text and its newline are two writes) is let finish first,
            # so stderr never lands inside it; one left unfinished (a prompt) is waited for a moment only.
            deadline = time.monotonic() + LINE_WAIT_S
            while not self._between_lines() and time.monotonic() < deadline:
                pass
            view = memoryview(data)
            while view:  # one write unless the disk is nearly full
                view = view[os.write(self._log, view) :]
            end = os.lseek(self._log, 0, os.SEEK_CUR)  # O_APPEND: right after what this write put there
            os.write(self._index, f"{stream} {end - len(data)} {end} {since_ns}\n".encode())
            self._seen = max(self._seen, end)
        except OSError:
            # Disk full, folder gone: keep draining the pipe, a replica must never block on its log.
            self._broken = True

    def _close_files(self) -> None:
        with self._lock:
            files, self._files_open = self._files_open, False
        if files:  # once only: a closed descriptor's number may already belong to another file
            for fd in (self._log, self._index):
                with contextlib.suppress(OSError):
                    os.close(fd)
