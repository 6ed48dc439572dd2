"""Reading replica log files while a job runs: new complete lines since the last poll, a file's last lines,
and byte-offset pages (what `logs --follow` asks the local backend and the emulator for)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

TAIL_LINES = 12
PAGE_BYTES = 1 << 20


class LogFollower:
    """Reads the complete lines appended to each replica's log file since the last poll."""

    def __init__(self) -> None:
        self._offsets: dict[str, int] = {}
        self._partial: dict[str, bytes] = {}

    def poll(self, paths: Mapping[str, Path]) -> list[tuple[str, str]]:
        lines: list[tuple[str, str]] = []
        for name, path in paths.items():
            try:
                with open(path, "rb") as handle:
                    handle.seek(self._offsets.get(name, 0))
                    data = handle.read()
            except FileNotFoundError:
                continue
            if not data:
                continue
            self._offsets[name] = self._offsets.get(name, 0) + len(data)
            chunk = self._partial.pop(name, b"") + data
            *complete, rest = chunk.split(b"\n")
            if rest:
                self._partial[name] = rest
            lines.extend((name, raw.decode(errors="replace").rstrip("\r")) for raw in complete)
        return lines

    def flush(self) -> list[tuple[str, str]]:
        """Unterminated last lines, once the writers are gone."""
        rest = [(name, data.decode(errors="replace")) for name, data in self._partial.items() if data]
        self._partial.clear()
        return rest


def last_lines(path: Path, count: int = TAIL_LINES) -> list[str]:
    try:
        data = path.read_bytes()[-64 * 1024 :]
    except OSError:
        return []
    return data.decode(errors="replace").splitlines()[-count:]


@dataclass(frozen=True)
class LogPage:
    """Up to `PAGE_BYTES` of one replica's log from a byte offset, and where the next page starts."""

    replica: str
    text: str
    next_offset: int


def read_pages(files: Mapping[str, Path], offsets: Mapping[str, int]) -> list[LogPage]:
    """The text each replica's log gained since `offsets` (replica -> byte offset), replicas in name order."""
    pages = []
    for replica, path in sorted(files.items()):
        start = offsets.get(replica, 0)
        try:
            with open(path, "rb") as handle:
                handle.seek(start)
                data = handle.read(PAGE_BYTES)
        except OSError:
            data = b""
        pages.append(LogPage(replica, data.decode("utf-8", "replace"), start + len(data)))
    return pages
