"""The job page's Ranks panel (`/api/ranks/<ref>`): the table `vertexdist ranks` prints, row by row as
cells of text (`health.table`), with the straggler and the culprit of a hung job marked, and each rank's own
step time for the panel's chart.

A local job's heartbeats are files in its run folder, an emulator job's in the emulator's data folder where
the console knows it. A Vertex job's (or an emulator job's without its folder) are lines in its replicas'
logs: the panel reads them as `vertexdist ranks` does, through the logs API, keeping one `LogScan` and
cursor per job so that each refresh reads only the lines written since the last. On Vertex it reads at most
every `VERTEX_READ_EVERY_S` (each rank writes a heartbeat line that often; Cloud Logging's read quota is
per project and per minute), and shows what it read last in between."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from vertexdist.console.heartbeat_place import FROM_LOGS, health_folder
from vertexdist.console.jobs import Console
from vertexdist.console.refs import JobRef
from vertexdist.health.log_scan import LogLine, LogScan, job_mark
from vertexdist.health.table import HEADS, cells
from vertexdist.health.verdict import culprit, named_rank
from vertexdist.shipped.vertexdist_launcher.health import LOG_EVERY_S

VERTEX_READ_EVERY_S = LOG_EVERY_S


@dataclass
class LogFollow:
    """One remote job's log lines read so far, scanned: the cursor after them and when they were read."""

    scan: LogScan = field(default_factory=LogScan)
    cursor: object | None = None
    read_at: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


def panel(report: dict[str, Any]) -> dict[str, Any]:
    """`jobs.ranks.report`'s rows as the panel shows them: cells, marks and the chart's point."""
    rows = report["ranks"]
    verdict = report.get("verdict")
    blamed = named_rank(verdict)  # the rank the verdict names, else the rows' culprit
    if verdict and blamed is None:
        found = culprit(rows)
        blamed = None if found is None else int(found["rank"])
    return {
        "columns": list(HEADS),
        "rows": [
            {
                "rank": row["rank"],
                "cells": cells(row),
                "straggler": bool(row["straggler"]),
                "culprit": row["rank"] == blamed,
                "step": row["step"],
                "own_step_s": row["own_step_s"],
            }
            for row in rows
        ],
        "verdict": report.get("verdict"),
        "ended": bool(report.get("ended")),
        "bars": ended_bars(rows) if report.get("ended") else None,
    }


def ended_bars(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """An ended job's chart: each rank's own step time at its last heartbeat, a bar from zero, the
    stragglers marked. The live chart's points are gathered while the page watches the job; a job that had
    ended gives one heartbeat per rank, which a line chart drew as one dot on a -1..1 s axis. None where no
    rank has a step time."""
    timed = sorted((row for row in rows if row.get("own_step_s") is not None), key=lambda row: row["rank"])
    if not timed:
        return None
    return {
        "title": "own step time per rank at its last heartbeat (s)",
        "labels": [f"rank {row['rank']}" for row in timed],
        "values": [row["own_step_s"] for row in timed],
        "stragglers": [bool(row.get("straggler")) for row in timed],
    }


def ranks_data(console: Console, ref: JobRef) -> dict[str, Any]:
    """The panel's JSON: `{"note": str, "columns", "rows", "verdict", "ended"}` (`note` set: no table)."""
    from vertexdist.jobs.ranks import report

    where = health_folder(console, ref)
    if where == FROM_LOGS:
        return {"note": "", **panel(logs_report(console, ref))}
    if isinstance(where, str):
        return {"note": where, "columns": list(HEADS), "rows": [], "verdict": None, "ended": False}
    return {"note": "", **panel(report(where))}


def logs_report(console: Console, ref: JobRef) -> dict[str, Any]:
    """`jobs.ranks.log_report` for a remote job, from the lines written since the panel last read them."""
    from vertexdist.backends.base import LogChunk
    from vertexdist.backends.watch import read_logs
    from vertexdist.jobs.ranks import log_report

    backend, name = console._remote(), console._remote_name(ref)
    with console.rank_follows_lock:
        follow: LogFollow = console.rank_follows.setdefault(name, LogFollow())
    with follow.lock:
        status = console._call(lambda: backend.describe(name))
        if follow.cursor is None and follow.read_at is None:  # the job's mark: its watchers' lines only
            follow.scan = LogScan(job_mark(status.spec))
        now = console.clock()
        stale = follow.read_at is None or now - follow.read_at >= VERTEX_READ_EVERY_S
        if backend.target.is_emulator or status.done or stale:

            def add(chunk: LogChunk) -> None:
                follow.scan.add(LogLine(chunk.replica, chunk.text, chunk.payload))

            follow.cursor = console._call(lambda: read_logs(backend, name, follow.cursor, None, add))
            follow.read_at = now
        return log_report(follow.scan.result(), status, now)
