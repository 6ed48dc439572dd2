"""`vertexdist ranks JOB [--json] [--stacks] [--watch]`: one row per global rank of a job, from its ranks'
heartbeats (docs/guide/rank-health.md): step, steps/s, own step time, share waiting, seconds since its last
progress, state, where it is, whether it is a straggler; then the verdict of a hung job. Works after the job
ended: the last heartbeats and the verdict are kept. JOB is what `vertexdist logs` takes: a local run's id or
folder, an emulator job, or a Vertex job (its heartbeats read from its replicas' logs).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from vertexdist.cli.plain_text import cell, plain
from vertexdist.cli.targets import (
    EMULATOR_DATA_DIR,
    EmulatorDataDir,
    Endpoint,
    JobLocation,
    JobProject,
    Transport,
    UseEmulator,
)
from vertexdist.errors import UsageError
from vertexdist.health.table import COLUMNS, HEADS, cells

WATCH_EVERY_S = 2.0
WATCH_LOGS_EVERY_S = 20.0  # a Vertex job's heartbeats come three times a minute


def table(found: dict[str, Any]) -> str:
    """The rows as aligned columns, then the verdict."""
    rows = found["ranks"]
    if not rows:
        return "no heartbeats yet: no rank has started (or the job ran before vertexdist watched its ranks)"
    lines_of = [list(HEADS)] + [[cell(c) for c in cells(row)] for row in rows]  # job data: no escapes
    widths = [max(len(line[i]) for line in lines_of) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines_of]
    if found.get("verdict"):
        lines.append(cell(found["verdict"]))
    return "\n".join(lines)


def missing_stacks(dumps: dict[int, str], found: dict[str, Any]) -> list[int]:
    """The ranks with a heartbeat but no stacks, where some rank has stacks or the job was called hung."""
    if not dumps and not found.get("verdict"):
        return []
    return sorted({int(row["rank"]) for row in found["ranks"]} - set(dumps))


def _print_stacks(dumps: dict[int, str], missing: list[int], live: bool, as_json: bool) -> None:
    why = "it did not answer" if live else "it left no dump (its process ended before it could write one)"
    if as_json:
        payload = {"stacks": {str(k): v for k, v in dumps.items()}, "no_stacks": missing}
        typer.echo(json.dumps(payload, indent=2))
        return
    if not dumps and not missing:
        typer.echo("no stacks: no rank answered, and none left a dump")
    for rank in sorted({*dumps, *missing}):
        text = dumps[rank].rstrip() if rank in dumps else f"no stacks of rank {rank}: {why}"
        shown = "\n".join(plain(line) for line in text.splitlines())
        typer.echo(f"===== rank {rank} =====\n{shown}\n")


def ranks(
    job: Annotated[
        str,
        typer.Argument(
            help="A job name or id (Vertex, or the emulator's with --emulator), or a local-run job id"
            " (local-...) or run folder."
        ),
    ],
    as_json: bool = typer.Option(False, "--json", help="Print {ranks: [...], verdict} as JSON."),
    stacks: bool = typer.Option(
        False,
        "--stacks",
        help="Every rank's stacks: asked for now while a local or emulator job runs, else its last dump.",
    ),
    watch: bool = typer.Option(
        False, "--watch", help="Refresh the table every 2 s until the job ends (Ctrl-C)."
    ),
    project: JobProject = None,
    location: JobLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
) -> None:
    """One row per global rank of a job: where each is, how fast it steps, which one holds the others up."""
    from vertexdist.cli.jobs import place
    from vertexdist.jobs import ranks as service

    if watch and (as_json or stacks):
        raise UsageError("--watch refreshes the table; it does not go with --json or --stacks")
    at = place(project, location, endpoint, transport, emulator, emulator_data_dir)
    folder: Path | None = service.heartbeat_folder(job, at)

    def read() -> dict[str, Any]:
        return service.report(folder) if folder is not None else service.read_log_health(job, at)

    found = read()
    if stacks:
        live = folder is not None and not found["ended"] and bool(found["ranks"])
        if folder is None:
            dumps: dict[int, str] = found["stacks"]
        else:
            dumps = service.stacks(folder, live=live)
        _print_stacks(dumps, missing_stacks(dumps, found), live, as_json)
        return
    if as_json:
        typer.echo(json.dumps({"ranks": found["ranks"], "verdict": found["verdict"]}, indent=2))
        return
    typer.echo(table(found))
    while watch and not found["ended"]:
        time.sleep(WATCH_EVERY_S if folder is not None else WATCH_LOGS_EVERY_S)
        found = read()
        typer.echo("\x1b[2J\x1b[H" + table(found))


def register(app: typer.Typer) -> None:
    app.command("ranks")(ranks)
