"""A rank's stdout and stderr, each line handed to the kernel in one write.

Every local rank of a replica writes into the same log (one file, opened O_APPEND, for stdout; one pipe for
stderr). Under `python -u`, which torchrun uses for its workers and local runs set with PYTHONUNBUFFERED,
`print(text)` is two writes, the text and then its newline, so two ranks printing at once can join their
lines: `rank 2/4 ... donerank 3/4 ... done` then an empty line, and a reader that looks for rank 3's line at
the start of a line finds none. Here each complete line (up to `MAX_PENDING` bytes) goes out in one
`os.write`, which O_APPEND keeps whole in a file and a pipe keeps whole up to PIPE_BUF.

What stays as `-u` gives it: a line appears as soon as it ends, `flush()` writes a partial line (a progress
text printed with `end=""` and `flush=True`), and the process's exit flushes what is left. Only a partial line
written without a flush waits, for its newline, as it would on a terminal. Standard library only.
"""

from __future__ import annotations

import io
import os
import sys
import threading
from typing import TextIO

# A line longer than this goes out in pieces (a binary dump, a huge progress line).
MAX_PENDING = 1 << 16


class WholeLineWriter(io.RawIOBase):
    """Raw writes to descriptor `fd`, holding back the part after the last newline until it is complete."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self._pending = bytearray()
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        size = len(data)
        with self._lock:
            self._pending += data
            end = self._pending.rfind(b"\n") + 1
            if not end and len(self._pending) >= MAX_PENDING:
                end = len(self._pending)
            if end:
                self._write_out(end)
        return size

    def flush(self) -> None:
        with self._lock:
            self._write_out(len(self._pending))

    def _write_out(self, end: int) -> None:
        """The first `end` pending bytes to the descriptor, in as few writes as the kernel takes."""
        view = memoryview(self._pending)[:end]
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        finally:
            view.release()
            del self._pending[:end]


def line_stream(fd: int, like: TextIO | None, errors: str) -> io.TextIOWrapper:
    """A text stream over `fd` whose lines reach it whole, in `like`'s encoding (UTF-8 without one)."""
    encoding = getattr(like, "encoding", None) or "utf-8"
    return io.TextIOWrapper(WholeLineWriter(fd), encoding=encoding, errors=errors, write_through=True)  # type: ignore[arg-type]


def install() -> None:
    """Replace this process's `sys.stdout` and `sys.stderr` (and their `__std*__` originals) with streams
    whose lines reach descriptors 1 and 2 whole. Call before the user's code runs; what was printed before
    is flushed first."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    sys.stdout = sys.__stdout__ = line_stream(1, sys.stdout, "strict")  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = line_stream(2, sys.stderr, "backslashreplace")  # type: ignore[misc]
