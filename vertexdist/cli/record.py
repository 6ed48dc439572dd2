"""`vertexdist describe JOB` and `vertexdist rerun JOB`: what made a job (its run record: the template's
text, the request as sent, the package's SHA-256 or the image digest, the code's git commit and whether it
was dirty, the fault plan, the attempts), and the very same job again with only a new output folder.

JOB is a Vertex or emulator job (its record is beside its outputs) or, for describe, a local run's id or
folder. Exit codes: 0 fine; 1 the call failed or there is no record; 2 usage.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from vertexdist.cli.jobs import AnyJobRef, place
from vertexdist.cli.plain_text import cell
from vertexdist.cli.record_view import record_lines
from vertexdist.cli.targets import (
    EMULATOR_DATA_DIR,
    AsJson,
    EmulatorDataDir,
    Endpoint,
    JobLocation,
    JobProject,
    Transport,
    UseEmulator,
)
from vertexdist.errors import JobFailedError
from vertexdist.jobs.rerun import wait_for
from vertexdist.jobs.where import JobPlace, open_job

if TYPE_CHECKING:
    from vertexdist.backends.base import JobStatus
    from vertexdist.goodput.ledger import Ledger


def describe(
    job: AnyJobRef,
    template: bool = typer.Option(False, "--template", help="Print the template's text as it was submitted."),
    request: bool = typer.Option(
        False, "--request", help="Print the request as it was sent (secrets masked)."
    ),
    project: JobProject = None,
    location: JobLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """Show what made a job: its template, request, package or image, code commit, fault plan, attempts."""
    from vertexdist.jobs.rerun import read_record, record_doubts
    from vertexdist.render import mask_secrets

    at = place(project, location, endpoint, transport, emulator, emulator_data_dir)
    with open_job(job, at) as (backend, name):
        record = read_record(backend, name)
        for line in record_doubts(backend, name, record):
            typer.echo(line, err=True)
        ledger = _ledger(job, at, backend, name) if not (template or request) else None
    shown = {**record, "request": mask_secrets(record["request"])}
    if ledger is not None:
        shown["goodput"] = ledger.to_json()
    if as_json:
        typer.echo(json.dumps(shown, indent=2))
    elif template:
        text = str((record.get("template") or {}).get("text") or "")  # the bucket's: no escapes
        typer.echo("".join(cell(line) + "\n" for line in text.splitlines()), nl=False)
    elif request:
        typer.echo(json.dumps(shown["request"], indent=2))
    else:
        for line in record_lines(shown):
            typer.echo(line)
        if ledger is not None:
            from vertexdist.goodput.view import table

            typer.echo("goodput (where the money went):")
            for line in table(ledger).splitlines():
                typer.echo(f"  {line}")


def _ledger(job: str, at: JobPlace, backend: Any, name: str) -> Ledger | None:
    """The job's goodput ledger (docs/guide/goodput.md), where its heartbeats and times can be read."""
    from vertexdist.jobs.goodput import ledger_at
    from vertexdist.jobs.ranks import heartbeat_folder

    try:
        folder = heartbeat_folder(job, at)
    except Exception:  # no run folder: the logs
        folder = None
    return ledger_at(backend, name, folder)


def rerun(
    job: AnyJobRef,
    detach: bool = typer.Option(
        False, "--detach", help="Return once the job is created; do not wait for it."
    ),
    secrets: Path | None = typer.Option(
        None,
        "--secrets",
        help="A YAML or JSON map NAME: value of the job's secret env values (the record keeps them masked); "
        "else the template file, then your environment.",
    ),
    project: JobProject = None,
    location: JobLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
) -> None:
    """Submit JOB's very request again, with the same package bytes; only the output folder is new."""
    from vertexdist.jobs.rerun import rerun as rerun_job
    from vertexdist.render import output_dir_of

    at = place(project, location, endpoint, transport, emulator, emulator_data_dir)
    with open_job(job, at) as (backend, name):
        new, record = rerun_job(backend, name, lambda line: typer.echo(line, err=True), secrets)
        typer.echo(new)
        typer.echo(f"outputs: {output_dir_of(record['request'])} (a rerun of {name})", err=True)
        if detach:
            typer.echo(f"follow it: vertexdist status {new}{at.flags}", err=True)
            return
        # Waited on here, as submit does: an emulator started for this command stops with it. Each new
        # state is said as it comes, so the wait is never silent.
        final = wait_for(backend, new, state_teller(new))
    if final.state != "SUCCEEDED":
        raise JobFailedError(
            f"job {final.state}: {final.error or 'no error message'}",
            hint=f"see its logs: vertexdist logs {new}{at.flags}",
        )
    typer.echo(f"job SUCCEEDED: {final.display_name}", err=True)


def state_teller(name: str) -> Callable[[JobStatus], None]:
    """A status callback that prints `job RUNNING: NAME` to stderr each time the job's state changes."""
    said: list[str] = []

    def tell(status: JobStatus) -> None:
        if not said or said[-1] != status.state:
            said.append(status.state)
            typer.echo(f"job {status.state}: {name}", err=True)

    return tell


def register(app: typer.Typer) -> None:
    app.command("describe")(describe)
    app.command("rerun")(rerun)
