"""A replica's log as lines that know their stream and time: the log file read with the index beside it
(`log_capture` writes both), incrementally, for `vertexdist logs` and the emulator's Cloud Logging.

Lines no index entry covers (a log from before the index existed, a line someone else wrote) take the stream
and time of the nearest write before them, or stdout and the file's modification time. Within one replica
times strictly increase (each further line of one write gets one more nanosecond), so `(time, replica,
offset)` orders every line of a job, the way Cloud Logging orders entries by timestamp, then insertId.
"""

from __future__ import annotations

import bisect
import os
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


class LogReader:
    """One replica's log; each call to `lines()` reads only what was appended since the last."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lines: list[LogLine] = []
        self._read_to = 0  # bytes of the log already turned into lines (complete ones only)
        self._index_read_to = 0
        self._mark_offsets: list[int] = []
        self._marks: list[tuple[bool, int]] = []  # (stderr, arrival ns) per write, in offset order
        self._last_ns = 0

    def lines(self, *, final: bool = False) -> list[LogLine]:
        """Every complete line so far, in order; with `final` (nothing writes the log any more) also an
        unterminated last line. The list is the reader's own: do not change it."""
        self._read_index()  # first: the capture writes a write's index line before its bytes
        rest = self._read_log()
        if final and rest:
            return [*self._lines, self._line(self._read_to, rest, advance=False)]
        return self._lines

    def _read_index(self) -> None:
        try:
            with open(index_path(self.path), "rb") as handle:
                handle.seek(self._index_read_to)
                data = handle.read()
        except OSError:
            return
        complete = data[: data.rfind(b"\n") + 1]
        self._index_read_to += len(complete)
        for raw in complete.splitlines():
            parts = raw.split()
            if len(parts) != 3 or not (parts[0].isdigit() and parts[2].isdigit()):
                continue  # a torn line from a crash: the lines it covered take their neighbour's
            offset = int(parts[0])
            if self._mark_offsets and offset < self._mark_offsets[-1]:
                continue  # out of order (two writers raced): the earlier mark stands
            self._mark_offsets.append(offset)
            self._marks.append((parts[1].decode() == STDERR, int(parts[2])))

    def _read_log(self) -> bytes:
        """Turn the complete lines appended since the last call into LogLines; the unterminated rest."""
        rest = b""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._read_to)
                while block := handle.read(_BLOCK):
                    data = rest + block
                    cut = data.rfind(b"\n") + 1
                    start = self._read_to
                    for raw in data[:cut].split(b"\n")[:-1]:
                        self._lines.append(self._line(start, raw, advance=True))
                        start += len(raw) + 1
                    self._read_to = start
                    rest = data[cut:]
        except OSError:
            return b""
        return rest

    def _line(self, offset: int, raw: bytes, *, advance: bool) -> LogLine:
        at = bisect.bisect_right(self._mark_offsets, offset) - 1
        if at >= 0:
            stderr, arrived = self._marks[at]
        elif self._marks:
            stderr, arrived = False, self._marks[0][1]
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
