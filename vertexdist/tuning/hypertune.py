"""Reading what a trial reported with cloudml-hypertune: its metric file's JSON lines as Vertex measurements.

cloudml-hypertune (PyPI `cloudml-hypertune`, `hypertune/hypertune.py`) rewrites `CLOUD_ML_HP_METRIC_FILE`
on every report with its last 100 reports, one JSON object a line, sorted keys, values as text:
`{"checkpoint_path": "", "global_step": "3", "timestamp": 1700000000.0, "trial": "2", "val_accuracy": "0.9"}`.
Every key but those four is a metric tag. Because the file keeps only the last 100, a reader keeps what it
has seen (`ReportLog`). Pure: the caller reads the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from vertexdist.wire.trials import Measurement

_NOT_METRICS = frozenset({"timestamp", "trial", "global_step", "checkpoint_path"})


@dataclass(frozen=True, order=True)
class Report:
    timestamp: float
    step: int
    tag: str
    value: float


def parse_reports(text: str) -> list[Report]:
    """The reports in a metric file's text; lines that are not whole reports (a torn write) are skipped."""
    found = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            timestamp = float(entry["timestamp"])
            step = int(float(entry.get("global_step") or 0))
        except (ValueError, KeyError, TypeError):
            continue
        if not isinstance(entry, dict):
            continue
        for tag, raw in entry.items():
            if tag in _NOT_METRICS:
                continue
            try:
                found.append(Report(timestamp, step, str(tag), float(raw)))
            except (TypeError, ValueError):
                continue
    return found


def to_measurements(reports: list[Report], started_at: float | None = None) -> tuple[Measurement, ...]:
    """Reports in time order as measurements: consecutive reports of one step are one measurement (one value
    per tag), unless a tag repeats, which starts the next one (reports without a step are all step 0)."""
    out: list[Measurement] = []
    current: dict[str, float] = {}
    step, stamp = 0, 0.0

    def close() -> None:
        if current:
            elapsed = None if started_at is None else max(0.0, stamp - started_at)
            out.append(Measurement(step=step, values=dict(current), elapsed_s=elapsed))

    for report in sorted(reports):
        if current and (report.step != step or report.tag in current):
            close()
            current = {}
        step, stamp = report.step, report.timestamp
        current[report.tag] = report.value
    close()
    return tuple(out)


class ReportLog:
    """Every report seen in a trial's metric file, across rewrites that drop the oldest ones."""

    def __init__(self) -> None:
        self._seen: set[Report] = set()

    def add(self, text: str) -> bool:
        """Take in the file's current text; True when it held a report not seen before."""
        new = set(parse_reports(text)) - self._seen
        self._seen |= new
        return bool(new)

    def measurements(self, started_at: float | None = None) -> tuple[Measurement, ...]:
        return to_measurements(sorted(self._seen), started_at)
