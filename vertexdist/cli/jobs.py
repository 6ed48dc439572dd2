"""`vertexdist status JOB`, `list`, `cancel JOB`, `logs JOB [--follow]`, against Vertex or the emulator
(`status` and `logs` read a local-run job's run folder too).

Where: VERTEX_API_ENDPOINT (or --endpoint) points at an emulator; otherwise Vertex's regional endpoint.
`--emulator`: the jobs of `submit --emulator`, in the emulator's folder (`vertexdist.jobs.where`).
Exit codes: 0 fine; 1 the job failed or was cancelled (status, logs --follow), or the call failed; 2 usage.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vertexdist.cli.job_view import print_chunk, status_lines, where, where_lines
from vertexdist.cli.targets import (
    EMULATOR_DATA_DIR,
    AsJson,
    EmulatorDataDir,
    Endpoint,
    JobLocation,
    JobProject,
    ListLocation,
    ListProject,
    Transport,
    UseEmulator,
)
from vertexdist.errors import JobFailedError, UsageError
from vertexdist.jobs.where import JobPlace, open_job, open_projects

if TYPE_CHECKING:
    from vertexdist.backends.base import JobStatus, LogChunk, LogQuery

FAILED_STATES = frozenset({"FAILED", "CANCELLED", "EXPIRED"})
JobRef = Annotated[
    str, typer.Argument(help="Job name (projects/P/locations/L/trainingPipelines/ID) or its ID.")
]
AnyJobRef = Annotated[
    str,
    typer.Argument(
        help="Job name (projects/P/locations/L/trainingPipelines/ID) or its ID; or a local-run job id"
        " (local-...) or run folder."
    ),
]


def place(
    project: str | None,
    location: str | None,
    endpoint: str | None,
    transport: str | None,
    emulator: bool,
    emulator_data_dir: Path,
) -> JobPlace:
    """The job commands' flags as the service takes them."""
    if emulator and endpoint:
        raise UsageError(
            "--emulator and --endpoint both say where to look", hint="drop one: --emulator is the local one"
        )
    return JobPlace(project, location, endpoint, transport, emulator_data_dir if emulator else None)


def status(
    job: AnyJobRef,
    project: JobProject = None,
    location: JobLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """Show a job's state, times and error. Exits 1 when the job failed or was cancelled."""
    at = place(project, location, endpoint, transport, emulator, emulator_data_dir)
    with open_job(job, at) as (backend, name):
        found = backend.describe(name)
        target = getattr(backend, "target", None)  # a Vertex backend's; a local one has none
    on_vertex = target is not None and not target.is_emulator
    flags = at.flags if target is not None else ""
    if as_json:
        found_where = where(found, name, on_vertex=on_vertex, flags=flags)
        typer.echo(json.dumps({**found.to_dict(), "where": found_where}, indent=2))
    else:
        typer.echo(
            "\n".join(status_lines(found) + where_lines(found, name, on_vertex=on_vertex, flags=flags))
        )
    if found.state in FAILED_STATES:
        raise typer.Exit(1)


LIST_HEADER = ("STATE", "CREATED", "DISPLAY NAME", "NAME")


def list_jobs(
    project: ListProject = None,
    location: ListLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
    limit: int = typer.Option(50, "--limit", min=1, help="Show at most this many jobs."),
    as_json: AsJson = False,
) -> None:
    """List training jobs in a project and location (with --emulator, the emulator's), newest first."""
    at = place(project, location, endpoint, transport, emulator, emulator_data_dir)
    found: list[JobStatus] = []
    problems: list[str] = []
    with open_projects(at) as backends:
        for backend in backends:
            listed = backend.list(limit=limit)
            found += listed
            problems += getattr(listed, "problems", ())  # jobs it could not read (backends.base.JobList)
        parents = [backend.target.parent for backend in backends]
    found = sorted(found, key=lambda s: s.create_time or "", reverse=True)[:limit]
    for problem in problems:
        typer.echo(f"problem: {problem}", err=True)
    if as_json:
        typer.echo(json.dumps([s.to_dict() for s in found], indent=2))
        return
    if not found:
        where_ = ", ".join(parents) if parents else f"the emulator's folder {emulator_data_dir}"
        typer.echo(f"no jobs in {where_}", err=True)
        return
    rows = [LIST_HEADER, *((s.state, s.create_time or "", s.display_name, s.name) for s in found)]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        typer.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[3]
        )


def cancel(
    job: JobRef,
    project: JobProject = None,
    location: JobLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """Ask Vertex to cancel a job (it goes CANCELLING, then CANCELLED)."""
    from vertexdist.backends.local.prepare import is_job_id

    if is_job_id(job.strip()):
        raise UsageError(
            f"{job} is a local-run job: it stops when its local-run does",
            hint="press Ctrl-C where local-run runs (or send it SIGTERM)",
        )
    at = place(project, location, endpoint, transport, emulator, emulator_data_dir)
    with open_job(job, at) as (backend, name):
        backend.cancel(name)
        found = backend.describe(name)
    if as_json:
        typer.echo(json.dumps({"name": name, "cancelRequested": True, "state": found.state}))
    else:
        typer.echo(f"cancel requested: {name} ({found.state})")


def _log_query(replica: str | None, trial: str | None, since: str | None, severity: str | None) -> LogQuery:
    from vertexdist.backends.base import SEVERITIES, LogQuery
    from vertexdist.spec.durations import parse_duration

    seconds = None
    if since is not None:
        try:
            seconds = parse_duration(since)
        except ValueError as exc:
            raise UsageError(f"--since: {exc}") from None
    if severity is not None and severity.upper() not in SEVERITIES:
        raise UsageError(
            f"--severity {severity!r} is not a severity", hint=f"use one of {', '.join(SEVERITIES)}"
        )
    return LogQuery(
        replica=replica,
        trial=trial,
        severity=severity.upper() if severity else None,
        since=time.time() - seconds if seconds is not None else None,
    )


def logs(
    job: AnyJobRef,
    follow: bool = typer.Option(
        False, "--follow", "-f", help="Keep streaming until the job ends (Ctrl-C stops)."
    ),
    replica: str | None = typer.Option(
        None, "--replica", help="Only this replica's lines, e.g. workerpool1-0."
    ),
    trial: str | None = typer.Option(None, "--trial", help="A tuning job: only this trial's lines."),
    since: str | None = typer.Option(
        None, "--since", help="Only lines of the last DURATION: 90s, 10m, 2h, 1d."
    ),
    severity: str | None = typer.Option(
        None, "--severity", help="Only lines at least this severe: INFO, WARNING, ERROR (stderr is ERROR)."
    ),
    project: JobProject = None,
    location: JobLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """Print a job's replica logs in time order (Cloud Logging on Vertex; a local-run job's run folder)."""
    from vertexdist.backends.watch import log_policy, watch

    query = _log_query(replica, trial, since, severity)
    at = place(project, location, endpoint, transport, emulator, emulator_data_dir)

    def show(chunk: LogChunk, found: JobStatus) -> None:
        print_chunk(chunk, found, as_json=as_json)

    with open_job(job, at) as (backend, name):
        final = watch(
            backend,
            name,
            on_status=lambda _s: None,
            on_logs=show,
            log_query=query,
            policy=log_policy(backend),
            until=lambda s: s.done or not follow,
        )
    if follow and final.state in FAILED_STATES:
        raise JobFailedError(f"job {final.state}: {final.error or ''}".rstrip(": "))


def register(app: typer.Typer) -> None:
    app.command("status")(status)
    app.command("list")(list_jobs)
    app.command("cancel")(cancel)
    app.command("logs")(logs)
