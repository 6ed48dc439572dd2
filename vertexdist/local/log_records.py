"""A replica's log as lines that know their stream and time: the log file read with the index beside it
(`log_capture` writes both), incrementally, for `vertexdist logs` and the emulator's Cloud Logging.

A line is stderr if it starts in a stderr region of the index, else stdout, with its region's time (or the
one before it); a log without an index is all stdout, at the file's modification time. Within one replica
times strictly increase (each further line of one write gets one more nanosecond), so `(time, replica,
offset)` orders every line of a job, the way Cloud Logging orders entries by timestamp, then insertId.
"""

from __future__ import annotations

import bisect
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from vertexdist.local.log_capture import STDERR, index_path

_BLOCK = 4 << 20


@dataclass(frozen=True)
class LogLine:
    offset: int  # where the line starts in the log file
    text: str  # without its newline
    stderr: bool
    time_ns: int

    @property
    def severity(self) -> str:
        """Vertex's: a replica's stdout is INFO, its stderr ERROR."""
        return "ERROR" if self.stderr else "INFO"


class LogReader:
    """One replica's log; each call to `lines()` reads only what was appended since the last."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lines: list[LogLine] = []
        self._read_to = 0  # bytes of the log already turned into lines (complete ones only)
        self._index_read_to = 0
        self._starts: list[int] = []
        self._regions: list[tuple[int, bool, int]] = []  # (end, stderr, ns) per region, in start order
        self._confirmed = 0  # every byte before this is in the index's regions or a gap (stdout)
        self._last_ns = 0

    def lines(self, *, final: bool = False) -> list[LogLine]:
        """Every line so far whose stream is known, in order; with `final` (nothing writes the log any
        more) every line, an unterminated last one too. The list is the reader's own: do not change it."""
        self._read_index()
        rest = self._read_log(final)
        if final and rest:
            return [*self._lines, self._line(self._read_to, rest, advance=False)]
        return self._lines

    def _read_index(self) -> None:
        try:
            with open(index_path(self.path), "rb") as handle:
                handle.seek(self._index_read_to)
                data = handle.read()
        except FileNotFoundError:
            # No capture wrote this log (it makes the index before its process starts): all stdout.
            self._confirmed = sys.maxsize
            return
        except OSError:
            return
        complete = data[: data.rfind(b"\n") + 1]
        self._index_read_to += len(complete)
        for raw in complete.splitlines():
            parts = raw.split()
            if len(parts) != 4 or not all(p.isdigit() for p in parts[1:]):
                continue  # a torn line from a crash: the lines it covered read as stdout
            start, end, ns = (int(p) for p in parts[1:])
            if self._starts and start < self._starts[-1]:
                continue  # out of order (two captures on one log): the earlier region stands
            self._starts.append(start)
            self._regions.append((end, parts[0].decode() == STDERR, ns))
            self._confirmed = max(self._confirmed, end)

    def _read_log(self, final: bool) -> bytes:
        """Turn the complete lines appended since the last call into LogLines, as far as their stream is
        known (all of them when `final`); the unterminated rest."""
        rest = b""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._read_to)
                while block := handle.read(_BLOCK):
                    complete = (rest + block).split(b"\n")  # it starts at self._read_to
                    rest = complete.pop()
                    for raw in complete:
                        if not final and self._read_to >= self._confirmed:
                            return b""  # not in the index yet: it may be a stderr piece being noted
                        self._lines.append(self._line(self._read_to, raw, advance=True))
                        self._read_to += len(raw) + 1
        except OSError:
            return b""
        return rest

    def _line(self, offset: int, raw: bytes, *, advance: bool) -> LogLine:
        at = bisect.bisect_right(self._starts, offset) - 1
        if at >= 0:
            end, stderr, arrived = self._regions[at]
            stderr = stderr and offset < end  # past a stderr piece's end: stdout written after it
        elif self._regions:
            stderr, arrived = False, self._regions[0][2]
        else:
            stderr, arrived = False, self._mtime_ns()
        time_ns = max(arrived, self._last_ns + 1)
        if advance:
            self._last_ns = time_ns
        text = raw.decode("utf-8", "replace").removesuffix("\r")
        return LogLine(offset=offset, text=text, stderr=stderr, time_ns=time_ns)

    def _mtime_ns(self) -> int:
        try:
            return os.stat(self.path).st_mtime_ns
        except OSError:
            return 0
