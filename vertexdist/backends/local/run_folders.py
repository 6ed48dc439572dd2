"""The run folders under a runs folder, as lists and views read them: which hold a job (or a tuning run),
and a stamp of a folder's files that changes whenever one of them does. For the local backend and its
tuning part both.
"""

from __future__ import annotations

import os
from pathlib import Path


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
