"""The job page's Ranks panel (`/api/ranks/<ref>`): the table `vertexdist ranks` prints, row by row as
cells of text (`health.table`), with the straggler and the culprit of a hung job marked, and each rank's own
step time for the panel's chart. Read from the heartbeats in the job's health folder: a local job's run
folder, or an emulator job's folder under the emulator's data folder. A Vertex job's heartbeats are lines in
its replicas' logs, which the panel does not read: it says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vertexdist.console.jobs import Console, NotFound
from vertexdist.console.refs import JobRef
from vertexdist.health.folder import HEALTH_DIR
from vertexdist.health.table import HEADS, cells
from vertexdist.health.verdict import culprit

VERTEX_NOTE = (
    "Rank health for Vertex jobs is in the replica logs: each rank writes a `vertexdist_health` line three"
    " times a minute (see them on the Logs panel, or with `vertexdist logs JOB`)."
)
NO_FOLDER_NOTE = (
    "Rank health of an emulator job is read from the emulator's data folder: start the console with"
    " --emulator (and --emulator-data-dir) to see it."
)
TUNING_NOTE = "A tuning job's ranks are each trial's: open a trial."


def health_folder(console: Console, ref: JobRef) -> Path | str:
    """Where `ref`'s heartbeats are, or the note the panel shows instead; NotFound for no such job."""
    if console.is_tuning(ref):
        return TUNING_NOTE
    if ref.source == "local":
        backend, name = console._local_job(ref)
        run_dir = backend.run_dir(name)
        if not run_dir.is_dir():
            raise NotFound(f"no local job {ref.job}")
        return run_dir / HEALTH_DIR
    if not console._remote().target.is_emulator:  # no remote at all: NotFound
        return VERTEX_NOTE
    if console.emulator_dir is None:
        return NO_FOLDER_NOTE
    from vertexdist.jobs.ranks import _emulator_dir

    found = _emulator_dir(ref.job, console.emulator_dir)
    if found is None:
        return "No heartbeats: the emulator's data folder holds no run of this job."
    return found / HEALTH_DIR


def panel(report: dict[str, Any]) -> dict[str, Any]:
    """`jobs.ranks.report`'s rows as the panel shows them: cells, marks and the chart's point."""
    rows = report["ranks"]
    blamed = culprit(rows) if report.get("verdict") else None
    return {
        "columns": list(HEADS),
        "rows": [
            {
                "rank": row["rank"],
                "cells": cells(row),
                "straggler": bool(row["straggler"]),
                "culprit": blamed is not None and row["rank"] == blamed["rank"],
                "step": row["step"],
                "own_step_s": row["own_step_s"],
            }
            for row in rows
        ],
        "verdict": report.get("verdict"),
        "ended": bool(report.get("ended")),
    }


def ranks_data(console: Console, ref: JobRef) -> dict[str, Any]:
    """The panel's JSON: `{"note": str, "columns", "rows", "verdict", "ended"}` (`note` set: no table)."""
    from vertexdist.jobs.ranks import report

    where = health_folder(console, ref)
    if isinstance(where, str):
        return {"note": where, "columns": list(HEADS), "rows": [], "verdict": None, "ended": False}
    return {"note": "", **panel(report(where))}
