"""TensorBoard time series points, kept apart from their series' resource: one append-only file of JSON
lines per series (`<data_dir>/resources/experiments/points/<sha256 of the name>.jsonl`, 0600), and the
points in memory, each series under a lock of its own.

A write costs what it adds (the lines appended), never a rewrite of the series, and holds only its series'
lock: other calls (the Experiments and metadata routes, other series) go on meanwhile. Reads are bounded as
Vertex's are: the newest `limit` points of a series, or one page of them.

The metadata store keeps each execution's events the same way (`ExperimentStore.events`): an event list is a
series of its own, appended to, never rewritten with its execution.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from vertexdist.private_files import make_private_dir, open_private, write_private_text

Point = dict[str, Any]


class _Series:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.points: list[Point] = []
        self.loaded = False


class SeriesPoints:
    """Every time series' points, by the series' full name (`folder` None: in memory only)."""

    def __init__(self, folder: Path | None) -> None:
        self._folder = folder
        self._series: dict[str, _Series] = {}
        self._lock = threading.Lock()  # held only to find or make a series' entry

    def _path(self, name: str) -> Path:
        assert self._folder is not None
        return self._folder / f"{hashlib.sha256(name.encode()).hexdigest()}.jsonl"

    def _entry(self, name: str) -> _Series:
        with self._lock:
            entry = self._series.get(name)
            if entry is None:
                entry = self._series[name] = _Series()
            return entry

    def _load(self, name: str, entry: _Series) -> None:
        """Read the series' file once (under its lock); a torn last line from a crash is skipped."""
        if entry.loaded:
            return
        entry.loaded = True
        if self._folder is None:
            return
        with contextlib.suppress(OSError), open(self._path(name), encoding="utf-8") as handle:
            for line in handle:
                with contextlib.suppress(ValueError):
                    point = json.loads(line)
                    if isinstance(point, dict):
                        entry.points.append(point)

    def append(self, name: str, points: list[Point]) -> None:
        """Add points to a series: one write of their lines to its file."""
        entry = self._entry(name)
        with entry.lock:
            self._load(name, entry)
            if self._folder is not None and points:
                make_private_dir(self._folder)
                text = "".join(json.dumps(p, separators=(",", ":")) + "\n" for p in points)
                fd = open_private(self._path(name), os.O_WRONLY | os.O_APPEND)
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text)
            entry.points.extend(points)

    def count(self, name: str) -> int:
        entry = self._entry(name)
        with entry.lock:
            self._load(name, entry)
            return len(entry.points)

    def newest(self, name: str, limit: int) -> list[Point]:
        """The newest `limit` points, oldest first."""
        entry = self._entry(name)
        with entry.lock:
            self._load(name, entry)
            return list(entry.points[-limit:]) if limit > 0 else []

    def all(self, name: str) -> list[Point]:
        """Every point of a series, in the order written."""
        entry = self._entry(name)
        with entry.lock:
            self._load(name, entry)
            return list(entry.points)

    def page(self, name: str, start: int, size: int) -> tuple[list[Point], int | None]:
        """Points `start` to `start + size` in the order written, and where the next page starts (None: the
        last page)."""
        entry = self._entry(name)
        with entry.lock:
            self._load(name, entry)
            found = list(entry.points[start : start + size])
            return found, (start + size if start + size < len(entry.points) else None)

    def drop(self, name: str) -> None:
        """Forget a deleted series' points (and its file)."""
        with self._lock:
            self._series.pop(name, None)
        if self._folder is not None:
            self._path(name).unlink(missing_ok=True)

    def replace(self, name: str, points: list[Point]) -> None:
        """Set a series' points (a finished job's run, written once): its file written anew."""
        entry = self._entry(name)
        with entry.lock:
            entry.loaded = True
            if self._folder is not None:
                make_private_dir(self._folder)
                text = "".join(json.dumps(p, separators=(",", ":")) + "\n" for p in points)
                write_private_text(self._path(name), text)
            entry.points = list(points)
