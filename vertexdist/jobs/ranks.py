"""`vertexdist ranks JOB`: a job's ranks from the heartbeats its watchers left (`vertexdist.health`).

JOB is what `vertexdist logs` takes. A local run's heartbeats are in its run folder; an emulator job's in the
emulator's folder (`jobs/<custom job id>/health`). A Vertex job's heartbeats are lines in its Cloud Logging
log, which this does not read yet: it says so.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from vertexdist.errors import UsageError
from vertexdist.health.folder import (
    HEALTH_DIR,
    ask_stacks,
    read_beats,
    read_stacks,
    read_summary,
    read_verdict,
)
from vertexdist.health.verdict import rank_rows
from vertexdist.jobs.find import local_job
from vertexdist.jobs.where import EMULATOR_DATA_DIR, JobPlace
from vertexdist.spec.health import DEFAULT_STRAGGLER_RATIO


def _emulator_dir(job: str, folder: Path) -> Path | None:
    """An emulator job's run folder: its custom job's (a pipeline's backing custom job's)."""
    ident = job.strip().rsplit("/", 1)[-1]
    if (folder / "jobs" / ident).is_dir():
        return folder / "jobs" / ident
    try:
        pipeline = json.loads((folder / "resources" / "trainingPipelines" / f"{ident}.json").read_text())
        backing = str(pipeline["trainingTaskMetadata"]["backingCustomJob"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    run = folder / "jobs" / backing.rsplit("/", 1)[-1]
    return run if run.is_dir() else None


def health_dir(job: str, place: JobPlace) -> Path:
    """Where `job`'s heartbeats are; a clear error where there are none to read."""
    local = local_job(job)
    if local is not None:
        backend, name = local
        return backend.run_dir(name) / HEALTH_DIR
    folder = place.emulator_dir or EMULATOR_DATA_DIR
    found = _emulator_dir(job, folder)
    if found is not None:
        return found / HEALTH_DIR
    raise UsageError(
        f"no heartbeats found for {job.strip()}: it is not a local run, nor a job in the emulator's folder"
        f" {folder}",
        hint="for a Vertex job, read its replicas' `vertexdist_health` lines: vertexdist logs JOB",
    )


def report(folder: Path, now: float | None = None) -> dict[str, Any]:
    """`{"ranks": [...], "verdict": str | None, "stragglers": [...], "ended": bool}`; the clock of an ended
    job stops at its end."""
    summary = read_summary(folder)
    ended_at = summary.get("ended_at")
    rows = rank_rows(
        read_beats(folder),
        time.time() if now is None else now,
        DEFAULT_STRAGGLER_RATIO,
        float(ended_at) if isinstance(ended_at, int | float) else None,
    )
    for flagged in summary.get("stragglers") or []:  # what the monitor saw during the run
        for row in rows:
            if row["rank"] == flagged.get("rank") and not row["straggler"]:
                row["straggler"], row["slowdown"] = True, flagged.get("slowdown")
    return {"ranks": rows, "verdict": read_verdict(folder), "ended": ended_at is not None}


def stacks(folder: Path, *, live: bool) -> dict[int, str]:
    """Every rank's stacks: asked for now while the job runs, else the last dump."""
    if live:
        return ask_stacks(folder, len(read_beats(folder)))
    return read_stacks(folder)
