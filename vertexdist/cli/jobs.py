"""`vertexdist status JOB`, `list`, `cancel JOB`, `logs JOB [--follow]`, against Vertex or the emulator.

Where: VERTEX_API_ENDPOINT (or --endpoint) points at an emulator; otherwise Vertex's regional endpoint.
Exit codes: 0 fine; 1 the job failed or was cancelled (status, logs --follow), or the call failed; 2 usage.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import typer

from vertexdist.errors import JobFailedError

if TYPE_CHECKING:
    from vertexdist.backends.base import JobStatus, LogChunk
    from vertexdist.backends.vertex import VertexBackend

FAILED_STATES = frozenset({"FAILED", "CANCELLED", "EXPIRED"})

PROJECT = typer.Option(
    None, "--project", help="Google Cloud project (default: from the job name, GOOGLE_CLOUD_PROJECT)."
)
LOCATION = typer.Option(
    None, "--location", help="Vertex region (default: from the job name, GOOGLE_CLOUD_REGION)."
)
ENDPOINT = typer.Option(
    None,
    "--endpoint",
    help="Vertex API endpoint, e.g. http://127.0.0.1:PORT for the emulator (VERTEX_API_ENDPOINT).",
)
TRANSPORT = typer.Option(
    None, "--transport", help="grpc or rest (VERTEXDIST_API_TRANSPORT; default grpc, rest for the emulator)."
)
JSON = typer.Option(False, "--json", help="Print JSON instead of text.")


def project_backend(
    project: str | None, location: str | None, endpoint: str | None, transport: str | None
) -> VertexBackend:
    """The backend for a project and location named by the flags or the environment."""
    from vertexdist.backends.config import resolve_target
    from vertexdist.backends.vertex import VertexBackend

    target = resolve_target(
        env=os.environ, project=project, location=location, api_endpoint=endpoint, transport=transport
    )
    return VertexBackend(target)


def job_backend(
    job: str, project: str | None, location: str | None, endpoint: str | None, transport: str | None
) -> tuple[VertexBackend, str]:
    """The backend that holds `job`, and the job's full resource name. A full name's own project and
    location win over the flags; a bare id takes them from the flags or the environment."""
    from vertexdist.backends.config import check_job_ref, job_name, parse_job_name

    check_job_ref(job)
    parts = parse_job_name(job)
    if parts:
        project, location = parts["project"], parts["location"]
    backend = project_backend(project, location, endpoint, transport)
    name = job_name(job, backend.target)
    if not parts:
        name = _pipeline_or_custom_job(backend, name)
    return backend, name


def _pipeline_or_custom_job(backend: VertexBackend, pipeline_name: str) -> str:
    """A bare id names a TrainingPipeline (what submit makes) or, failing that, a CustomJob (what the SDK's
    CustomJob makes, and what `list` shows beside pipelines)."""
    from vertexdist.backends.errors import ApiCallError

    try:
        backend.describe(pipeline_name)
    except ApiCallError as exc:
        if exc.status != 404:
            raise
        custom_job = pipeline_name.replace("/trainingPipelines/", "/customJobs/")
        try:
            backend.describe(custom_job)
        except ApiCallError:
            raise exc from None
        return custom_job
    return pipeline_name


def status_lines(status: JobStatus) -> list[str]:
    lines = [f"{status.name}", f"  display name: {status.display_name}", f"  state:        {status.state}"]
    for label, value in (
        ("created", status.create_time),
        ("started", status.start_time),
        ("ended", status.end_time),
        ("error", status.error),
        ("custom job", status.backing_job),
        ("console", status.console_url),
    ):
        if value:
            # A failed job's error carries its replica's last lines: keep them under the label.
            lines.append(f"  {label + ':':<13} {value}".replace("\n", "\n" + " " * 16))
    pools = status.spec.get("workerPoolSpecs") or []
    for index, pool in enumerate(pools):
        if not pool:
            continue
        machine = pool.get("machineSpec") or {}
        accel = (
            f" + {machine.get('acceleratorCount')} x {machine['acceleratorType']}"
            if machine.get("acceleratorType")
            else ""
        )
        code = pool.get("pythonPackageSpec") or pool.get("containerSpec") or {}
        env = ", ".join(f"{e['name']}={e['value']}" for e in code.get("env") or [])
        lines.append(
            f"  workerpool{index}: {pool.get('replicaCount', 1)} x {machine.get('machineType')}{accel}"
            + (f"  env: {env}" if env else "")
        )
    return lines


def print_chunk(chunk: LogChunk, status: JobStatus, *, as_json: bool) -> None:
    from vertexdist.backends.vertex import mask_text

    text = mask_text(chunk.text, status.secret_values)
    if as_json:
        for line in text.splitlines():
            typer.echo(json.dumps({"replica": chunk.replica, "line": line}))
        return
    for line in text.splitlines():
        typer.echo(f"[{chunk.replica}] {line}")


def status(
    job: str = typer.Argument(..., help="Job name (projects/P/locations/L/trainingPipelines/ID) or its ID."),
    project: str | None = PROJECT,
    location: str | None = LOCATION,
    endpoint: str | None = ENDPOINT,
    transport: str | None = TRANSPORT,
    as_json: bool = JSON,
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
    project: str | None = PROJECT,
    location: str | None = LOCATION,
    endpoint: str | None = ENDPOINT,
    transport: str | None = TRANSPORT,
    limit: int = typer.Option(50, "--limit", min=1, help="Show at most this many jobs."),
    as_json: bool = JSON,
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
    job: str = typer.Argument(..., help="Job name or ID."),
    project: str | None = PROJECT,
    location: str | None = LOCATION,
    endpoint: str | None = ENDPOINT,
    transport: str | None = TRANSPORT,
    as_json: bool = JSON,
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
    job: str = typer.Argument(..., help="Job name or ID."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep streaming until the job ends."),
    project: str | None = PROJECT,
    location: str | None = LOCATION,
    endpoint: str | None = ENDPOINT,
    transport: str | None = TRANSPORT,
    as_json: bool = JSON,
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
