"""`vertexdist ranks JOB [--json] [--stacks] [--watch]`: one row per global rank of a job, from its ranks'
heartbeats (docs/guide/rank-health.md): step, steps/s, own step time, share waiting, seconds since its last
progress, state, where it is, whether it is a straggler; then the verdict of a hung job. Works after the job
ended: the last heartbeats and the verdict are kept. JOB is a local run's id or folder, or an emulator job.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from vertexdist.cli.targets import EMULATOR_DATA_DIR, EmulatorDataDir, UseEmulator
from vertexdist.errors import UsageError
from vertexdist.health.table import COLUMNS, HEADS, cells

WATCH_EVERY_S = 2.0


def table(found: dict[str, Any]) -> str:
    """The rows as aligned columns, then the verdict."""
    rows = found["ranks"]
    if not rows:
        return "no heartbeats yet: no rank has started (or the job ran before vertexdist watched its ranks)"
    lines_of = [list(HEADS)] + [cells(row) for row in rows]
    widths = [max(len(line[i]) for line in lines_of) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines_of]
    if found.get("verdict"):
        lines.append(str(found["verdict"]))
    return "\n".join(lines)


def ranks(
    job: Annotated[
        str, typer.Argument(help="A local-run job id (local-...) or run folder, or an emulator job.")
    ],
    as_json: bool = typer.Option(False, "--json", help="Print {ranks: [...], verdict} as JSON."),
    stacks: bool = typer.Option(
        False, "--stacks", help="Every rank's stacks: asked for now while the job runs, else its last dump."
    ),
    watch: bool = typer.Option(
        False, "--watch", help="Refresh the table every 2 s until the job ends (Ctrl-C)."
    ),
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
) -> None:
    """One row per global rank of a job: where each is, how fast it steps, which one holds the others up."""
    from vertexdist.jobs import ranks as service
    from vertexdist.jobs.where import JobPlace

    if watch and (as_json or stacks):
        raise UsageError("--watch refreshes the table; it does not go with --json or --stacks")
    folder: Path = service.health_dir(job, JobPlace(emulator_dir=emulator_data_dir if emulator else None))
    found = service.report(folder)
    if stacks:
        dumps = service.stacks(folder, live=not found["ended"] and bool(found["ranks"]))
        if as_json:
            typer.echo(json.dumps({"stacks": {str(k): v for k, v in dumps.items()}}, indent=2))
            return
        if not dumps:
            typer.echo("no stacks: no rank answered, and none left a dump")
        for rank, text in dumps.items():
            typer.echo(f"===== rank {rank} =====\n{text.rstrip()}\n")
        return
    if as_json:
        typer.echo(json.dumps({"ranks": found["ranks"], "verdict": found["verdict"]}, indent=2))
        return
    typer.echo(table(found))
    while watch and not found["ended"]:
        time.sleep(WATCH_EVERY_S)
        found = service.report(folder)
        typer.echo("\x1b[2J\x1b[H" + table(found))


def register(app: typer.Typer) -> None:
    app.command("ranks")(ranks)
