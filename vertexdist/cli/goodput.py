"""`vertexdist goodput JOB|MANAGED_ID [--json]`: where a job's money went (docs/guide/goodput.md): its billed
replica-seconds by start-up, productive, recomputed, hung, straggler wait, checkpointing and tail, in
dollars at `estimate`'s prices, goodput, and the advice they support. JOB is what `vertexdist logs` takes; a
managed job's id (`m-...`) gives the ledger across its attempts."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from vertexdist.cli.targets import (
    EMULATOR_DATA_DIR,
    EmulatorDataDir,
    Endpoint,
    JobLocation,
    JobProject,
    Transport,
    UseEmulator,
)


def goodput(
    job: Annotated[
        str,
        typer.Argument(
            help="A job name or id (Vertex, or the emulator's with --emulator), a local-run job id"
            " (local-...) or run folder, or a managed job's id (m-...)."
        ),
    ],
    as_json: bool = typer.Option(False, "--json", help="Print the ledger as JSON."),
    project: JobProject = None,
    location: JobLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
) -> None:
    """Where a job's money went: each part of its billed time, in replica-seconds and dollars, and advice."""
    from vertexdist.cli.jobs import place
    from vertexdist.goodput.history import history_for
    from vertexdist.goodput.view import table
    from vertexdist.jobs.goodput import ledger_of

    at = place(project, location, endpoint, transport, emulator, emulator_data_dir)
    ledger = ledger_of(job, at, history_for)
    if as_json:
        typer.echo(json.dumps(ledger.to_json(), indent=2))
        return
    typer.echo(table(ledger))


def register(app: typer.Typer) -> None:
    app.command("goodput")(goodput)
