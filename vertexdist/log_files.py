"""Reading replica log files while a job runs: new complete lines since the last poll, and a file's last
lines (what the live view and a failed job's message show; `log_records` reads them with stream and time)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

TAIL_LINES = 12


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


# Vertex's error message of a failed job carries the failing replica's last lines (its traceback); so do
# the emulator's jobs and both kinds of tuning trials.
MESSAGE_TAIL_LINES = 10
MESSAGE_TAIL_CHARS = 300


def replica_tail(log: Path | None) -> str:
    """The last lines of a replica's log, trimmed, to follow an error message (empty if there are none)."""
    lines = [line for line in last_lines(log, 4 * MESSAGE_TAIL_LINES) if line.strip()] if log else []
    trimmed = [
        line if len(line) <= MESSAGE_TAIL_CHARS else line[: MESSAGE_TAIL_CHARS - 3] + "..."
        for line in lines[-MESSAGE_TAIL_LINES:]
    ]
    return "".join(f"\n{line}" for line in trimmed)
