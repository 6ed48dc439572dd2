"""A job's metrics as chart series: the TensorBoard scalars in its `AIP_TENSORBOARD_LOG_DIR` (read by
tensorboard's own `EventMultiplexer`, one run per subfolder), and a tuning job's trial measurements (what
the trials reported in cloudml-hypertune's format, as the backend reads them).

Readers are kept per folder, so a page that polls a running job reads only what was appended since.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vertexdist.wire.trials import Trial

KEEP_READERS = 32
MAX_POINTS = 2000  # per series: a chart of more points than pixels shows nothing more
EPOCH_PREFIX = "epoch/"  # trainer_pkg.scalars: these tags' steps are epochs


@dataclass(frozen=True)
class Series:
    """One line of a chart: `tag` of `run` (a TensorBoard run, or a trial), points as (step, value)."""

    tag: str
    run: str
    points: tuple[tuple[int, float], ...]
    x_label: str = "step"

    def to_json(self) -> dict[str, Any]:
        return {"tag": self.tag, "run": self.run, "x": self.x_label, "points": [list(p) for p in self.points]}


@dataclass
class _Reader:
    multiplexer: Any
    lock: threading.Lock = field(default_factory=threading.Lock)


def _thin(points: list[tuple[int, float]]) -> tuple[tuple[int, float], ...]:
    """At most MAX_POINTS, evenly spread, the last one kept."""
    if len(points) <= MAX_POINTS:
        return tuple(points)
    stride = math.ceil(len(points) / MAX_POINTS)
    kept = points[::stride]
    if kept[-1] != points[-1]:
        kept.append(points[-1])
    return tuple(kept)


class ScalarReaders:
    """EventMultiplexers by folder (the least recently used dropped past KEEP_READERS)."""

    def __init__(self) -> None:
        self._readers: OrderedDict[Path, _Reader] = OrderedDict()
        self._lock = threading.Lock()

    def _reader(self, folder: Path) -> _Reader:
        from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

        with self._lock:
            found = self._readers.get(folder)
            if found is None:
                # size_guidance 0: keep every scalar (the default samples 10,000 per tag at random).
                found = _Reader(EventMultiplexer(size_guidance={"scalars": 0}))
                self._readers[folder] = found
            self._readers.move_to_end(folder)
            while len(self._readers) > KEEP_READERS:
                self._readers.popitem(last=False)
            return found

    def scalars(self, folder: Path, windows: Sequence[Window] | None = None) -> list[Series]:
        """Every scalar tag of every run under `folder`, by run then tag ([] when there is none). With
        `windows` (a managed job's attempts, which share one folder), each run's scalars are cut into one
        series per window: what was written while that attempt ran, never the next attempt's."""
        if not folder.is_dir():
            return []
        reader = self._reader(folder)
        with reader.lock:
            multiplexer = reader.multiplexer
            multiplexer.AddRunsFromDirectory(str(folder))
            multiplexer.Reload()
            found = []
            for run, tags in sorted(multiplexer.Runs().items()):
                for tag in sorted(tags.get("scalars", [])):
                    events = multiplexer.Scalars(run, tag)
                    for name, kept in _cut(run, events, windows):
                        by_step = {int(e.step): float(e.value) for e in kept if math.isfinite(e.value)}
                        points = sorted(by_step.items())  # a resumed run's steps written twice count once
                        if points:
                            found.append(Series(tag, name, _thin(points), x_label(tag)))
        return found


@dataclass(frozen=True)
class Window:
    """An attempt's time (seconds since the epoch): scalars written after `start` (None: any time before)
    up to `end` (None: still running) are its own."""

    name: str
    start: float | None
    end: float | None

    def holds(self, wall_time: float) -> bool:
        return (self.start is None or wall_time >= self.start) and (self.end is None or wall_time <= self.end)


def _cut(run: str, events: Sequence[Any], windows: Sequence[Window] | None) -> list[tuple[str, list[Any]]]:
    if windows is None:
        return [(run, list(events))]
    return [
        (w.name if run == "." else f"{w.name} {run}", [e for e in events if w.holds(float(e.wall_time))])
        for w in windows
    ]


def x_label(tag: str) -> str:
    """What a tag's steps count: the bundled trainer steps its `epoch/...` scalars by epoch."""
    return "epoch" if tag.startswith(EPOCH_PREFIX) else "step"


def trial_series(trials: Iterable[Trial], metric: str) -> list[Series]:
    """Each trial's reported `metric` against its step (cloudml-hypertune's global_step)."""
    found = []
    for trial in trials:
        points = sorted(
            {m.step: float(m.values[metric]) for m in trial.measurements if metric in m.values}.items()
        )
        if points:
            found.append(Series(metric, f"trial {trial.id}", _thin(points)))
    return found
