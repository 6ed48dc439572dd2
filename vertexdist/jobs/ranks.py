"""`vertexdist ranks JOB`: a job's ranks from the heartbeats its watchers left (`vertexdist.health`).

JOB is what `vertexdist logs` takes. A local run's heartbeats are in its run folder; an emulator job's in the
emulator's folder (`jobs/<custom job id>/health`). A Vertex job's (or an emulator job's reached through
`--endpoint`) are lines in its replicas' logs, read the way `vertexdist logs` reads them (Cloud Logging's
`entries.list`) and scanned by `vertexdist.health.log_scan`: each rank's latest heartbeat, its last stack
dump and the verdict of a rank that found itself hung.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from vertexdist.backends.base import JobStatus, LogChunk
from vertexdist.errors import NotFoundError
from vertexdist.health.folder import (
    HEALTH_DIR,
    ask_stacks,
    read_beats,
    read_stacks,
    read_summary,
    read_verdict,
)
from vertexdist.health.log_scan import LogHealth, LogLine, job_mark, scan
from vertexdist.health.verdict import blamed, rank_rows
from vertexdist.jobs.find import local_job
from vertexdist.jobs.where import EMULATOR_DATA_DIR, JobPlace
from vertexdist.spec.health import DEFAULT_STRAGGLER_RATIO
from vertexdist.wire.timestamps import parse_ns


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
    """Where a local or emulator job's heartbeat files are; a clear error where there are none to read."""
    local = local_job(job)
    if local is not None:
        backend, name = local
        return backend.run_dir(name) / HEALTH_DIR
    folder = place.emulator_dir or EMULATOR_DATA_DIR
    found = _emulator_dir(job, folder)
    if found is not None:
        return found / HEALTH_DIR
    raise NotFoundError(
        f"no heartbeats found for {job.strip()}: it is not a local run, nor a job in the emulator's folder"
        f" {folder}",
        hint=f"its jobs: vertexdist list{place.flags}",
    )


def heartbeat_folder(job: str, place: JobPlace) -> Path | None:
    """`health_dir` for a local run, a job of --emulator, or one the default emulator folder holds when no
    endpoint is named; None for a job whose heartbeats are in its logs (Vertex, or one reached through
    `--endpoint`)."""
    if local_job(job) is not None or place.emulator_dir is not None:
        return health_dir(job, place)
    if place.endpoint is None:
        found = _emulator_dir(job, EMULATOR_DATA_DIR)
        if found is not None:
            return found / HEALTH_DIR
    return None


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


def log_health(chunks: list[LogChunk], mark: str | None = None) -> LogHealth:
    """What the watchers left in a job's log lines (only lines with the job's mark, where it has one)."""
    return scan((LogLine(c.replica, c.text, c.payload) for c in chunks), mark)


def log_report(found: LogHealth, status: JobStatus, now: float | None = None) -> dict[str, Any]:
    """`report`'s shape from a job's log lines; the clock of an ended job stops at its end."""
    ended_at = parse_ns(status.end_time) / 1e9 if status.done and status.end_time else None
    rows = rank_rows(found.beats, time.time() if now is None else now, DEFAULT_STRAGGLER_RATIO, ended_at)
    # A job that succeeded was not hung, whatever a line says.
    verdict = None if status.succeeded else found.verdict
    if verdict is not None:  # a rank's own verdict names itself: the culprit, where the heartbeats show one
        verdict = blamed(verdict, found.beats)
    if verdict is None and status.error and status.error.startswith("hung:"):
        verdict = status.error  # the emulator's job error is the verdict
    return {"ranks": rows, "verdict": verdict, "ended": status.done, "stacks": found.stacks}


def read_log_health(job: str, place: JobPlace) -> dict[str, Any]:
    """A Vertex job's ranks from its replicas' logs, read as `vertexdist logs` reads them (every line)."""
    from vertexdist.backends.watch import read_logs
    from vertexdist.jobs.where import open_job

    chunks: list[LogChunk] = []
    with open_job(job, place) as (backend, name):
        status = backend.describe(name)
        read_logs(backend, name, None, None, chunks.append)
    return log_report(log_health(chunks, job_mark(status.spec)), status)
