"""The text of `vertexdist experiments runs`: a table, one row per run, with `run_name`, `state`, then a
`param.X` column per param and a `metric.X` column per metric (and `time_series_metric.X`, each series' last
value), as `aiplatform.get_experiment_df` names them. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vertexdist.cli.plain_text import cell

_GROUPS = (("params", "param."), ("metrics", "metric."), ("time_series_metrics", "time_series_metric."))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.6g}"
    return cell(value)  # a run's name or param is the job's: no escape reaches a terminal


def columns(runs: Sequence[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(header, group, key) of every column, params then metrics, each group's keys sorted."""
    found: list[tuple[str, str, str]] = [("run_name", "", "run_name"), ("state", "", "state")]
    for group, prefix in _GROUPS:
        keys = sorted({str(k) for run in runs for k in (run.get(group) or {})})
        found += [(cell(prefix + key), group, key) for key in keys]
    return found


def table(runs: Sequence[dict[str, Any]]) -> list[str]:
    """The runs as aligned text lines, a header first; a run without a column shows `-`."""
    cols = columns(runs)
    rows = [[header for header, _, _ in cols]]
    for run in runs:
        rows.append(
            [_cell(run.get(key) if not group else (run.get(group) or {}).get(key)) for _, group, key in cols]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
