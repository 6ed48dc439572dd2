"""The ranks table's columns and cells, as `vertexdist ranks` prints them and the console's Ranks panel
shows them (one place for both). Pure: a row of `verdict.rank_rows` in, text out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

COLUMNS = (
    ("rank", "RANK"),
    ("replica", "REPLICA"),
    ("local_rank", "LOCAL"),
    ("step", "STEP"),
    ("steps_per_s", "STEPS/S"),
    ("own_step_s", "OWN STEP"),
    ("wait_share", "WAITING"),
    ("last_progress_s", "LAST STEP"),
    ("state", "STATE"),
    ("where", "WHERE"),
    ("straggler", "STRAGGLER"),
)
HEADS = tuple(head for _key, head in COLUMNS)


def cell(key: str, row: Mapping[str, Any]) -> str:
    """One cell's text: `-` where the value is unknown."""
    value = row.get(key)
    if value is None:
        return "-"
    if key == "own_step_s":
        return f"{value * 1000:.0f}ms"
    if key == "wait_share":
        return f"{value * 100:.0f}%"
    if key == "last_progress_s":
        return f"{value:g}s ago"
    if key == "straggler":
        return f"yes ({row['slowdown']:g}x)" if value and row.get("slowdown") else ("yes" if value else "")
    return str(value)


def cells(row: Mapping[str, Any]) -> list[str]:
    """A row's cells, in `COLUMNS`' order."""
    return [cell(key, row) for key, _head in COLUMNS]
