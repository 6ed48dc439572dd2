"""The run folders under a runs folder, as lists and views read them: which hold a job (or a tuning run),
a stamp of a folder's files that changes whenever one of them does, and a run folder's JSON file read
while it may still be written. For the local backend and its tuning part both.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def run_folders(runs: Path, marker: str) -> list[str]:
    """Names of the folders under `runs` that hold a file `marker`, newest first (job ids sort by time)."""
    try:
        entries = list(os.scandir(runs))
    except OSError:
        return []
    return sorted(
        (e.name for e in entries if e.is_dir() and os.path.isfile(os.path.join(e.path, marker))), reverse=True
    )


def file_stamp(folder: Path, names: tuple[str, ...]) -> tuple[int, ...]:
    """Size and modification time of each of `folder`'s files `names` (-1 for one that is missing)."""
    stamp: list[int] = []
    base = os.path.join(folder, "")  # strings, not Paths: a list page stats every run's files
    for file in names:
        try:
            found = os.stat(base + file)
        except OSError:
            stamp += [-1, -1]
            continue
        stamp += [found.st_size, found.st_mtime_ns]
    return tuple(stamp)


def read_run_json(path: Path) -> dict[str, Any]:
    """A run folder's JSON object (job.json, summary.json, ...), or {} when it is missing, not (yet) whole,
    or not an object."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}
