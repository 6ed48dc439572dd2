"""`vertexdist status JOB`, `list`, `cancel JOB`, `logs JOB [--follow]`, against Vertex or the emulator.

Where: VERTEX_API_ENDPOINT (or --endpoint) points at an emulator; otherwise Vertex's regional endpoint.
Exit codes: 0 fine; 1 the job failed or was cancelled (status, logs --follow), or the call failed; 2 usage.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from vertexdist.cli.job_view import print_chunk, status_lines
from vertexdist.cli.targets import (
    AsJson,
    Endpoint,
    Location,
    Project,
    Transport,
    job_backend,
    project_backend,
)
from vertexdist.errors import JobFailedError

if TYPE_CHECKING:
    from vertexdist.backends.base import JobStatus, LogChunk

FAILED_STATES = frozenset({"FAILED", "CANCELLED", "EXPIRED"})
JobRef = Annotated[
    str, typer.Argument(help="Job name (projects/P/locations/L/trainingPipelines/ID) or its ID.")
]


def status(
    job: JobRef,
    project: Project = None,
    location: Location = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    as_json: AsJson = False,
) -> None:
    """Show a job's state, times and error. Exits 1 when the job failed or was cancelled."""
    backend, name = job_backend(job, project, location, endpoint, transport)
    found = backend.describe(name)
    if as_json:
        typer.echo(json.dumps(found.to_dict(), indent=2))
    else:
        typer.echo("\n".join(status_lines(found)))
    if found.state in FAILED_STATES:
        raise typer.Exit(1)


def list_jobs(
    project: Project = None,
    location: Location = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    limit: int = typer.Option(50, "--limit", min=1, help="Show at most this many jobs."),
    as_json: AsJson = False,
) -> None:
    """List training jobs in a project and location, newest first."""
    backend = project_backend(project, location, endpoint, transport)
    found = backend.list(limit=limit)
    if as_json:
        typer.echo(json.dumps([s.to_dict() for s in found], indent=2))
        return
    if not found:
        typer.echo(f"no jobs in {backend.target.parent}", err=True)
        return
    for s in found:
        typer.echo(f"{s.state:<11} {s.create_time or '':<28} {s.display_name:<32} {s.name}")


def cancel(
    job: JobRef,
    project: Project = None,
    location: Location = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    as_json: AsJson = False,
) -> None:
    """Ask Vertex to cancel a job (it goes CANCELLING, then CANCELLED)."""
    backend, name = job_backend(job, project, location, endpoint, transport)
    backend.cancel(name)
    found = backend.describe(name)
    if as_json:
        typer.echo(json.dumps({"name": name, "cancelRequested": True, "state": found.state}))
    else:
        typer.echo(f"cancel requested: {name} ({found.state})")


def logs(
    job: JobRef,
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep streaming until the job ends."),
    project: Project = None,
    location: Location = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    as_json: AsJson = False,
) -> None:
    """Print a job's replica logs (emulator), or where Cloud Logging shows them (Vertex)."""
    from vertexdist.backends.watch import watch

    backend, name = job_backend(job, project, location, endpoint, transport)
    if not backend.target.is_emulator:
        page = backend.logs(name)
        for link in page.links:
            typer.echo(json.dumps({"link": link}) if as_json else f"Cloud Logging: {link}")
        return

    def show(chunk: LogChunk, found: JobStatus) -> None:
        print_chunk(chunk, found, as_json=as_json)

    final = watch(
        backend, name, on_status=lambda _s: None, on_logs=show, until=lambda s: s.done or not follow
    )
    if follow and final.state in FAILED_STATES:
        raise JobFailedError(f"job {final.state}: {final.error or ''}".rstrip(": "))


def register(app: typer.Typer) -> None:
    app.command("status")(status)
    app.command("list")(list_jobs)
    app.command("cancel")(cancel)
    app.command("logs")(logs)
