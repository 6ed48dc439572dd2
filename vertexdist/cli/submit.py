"""`vertexdist submit TEMPLATE`: package, upload, create the TrainingPipeline, then follow it.

The request sent is exactly what `--dry-run` prints (and `vertexdist render --request` shows, plus the
real package URI and the request-hash label). The SDK's blocking `run()` polls every 5 s; this polls with
backoff from 0.2 s. `--emulator` runs a local Vertex + Cloud Storage in-process for the command's length.
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from vertexdist.cli.jobs import ENDPOINT, TRANSPORT, print_chunk
from vertexdist.errors import JobFailedError, UsageError, VertexdistError

if TYPE_CHECKING:
    from vertexdist.backends.base import JobStatus, LogChunk, Submission
    from vertexdist.backends.config import Target
    from vertexdist.backends.vertex import VertexBackend
    from vertexdist.spec.models import JobTemplate

DUPLICATE_WINDOW_S = 600.0
EMULATOR_DATA_DIR = Path(".vertexdist/emulator")


class _StatusView:
    """State changes on stderr: a live spinner line on a terminal, one line per change otherwise."""

    def __init__(self, name: str, live: bool) -> None:
        self._name = name
        self._started = time.monotonic()
        self._last = ""
        self._live = None
        if live:
            from rich.console import Console

            self._live = Console(stderr=True).status(f"{name}: submitted")
            self._live.start()

    def update(self, status: JobStatus) -> None:
        elapsed = time.monotonic() - self._started
        if self._live is not None:
            self._live.update(f"{status.state:<10} {elapsed:6.1f}s  {status.display_name}  {self._name}")
        if status.state != self._last:
            self._last = status.state
            if self._live is None:
                print(f"{elapsed:6.1f}s  {status.state}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()


def _apply_target(
    template: JobTemplate,
    *,
    project: str | None,
    location: str | None,
    bucket: str | None,
    endpoint: str | None,
    transport: str | None,
) -> tuple[JobTemplate, Target]:
    """Where the job goes: flags > template > environment (see backends.config); the template follows."""
    from vertexdist.backends.config import resolve_target

    target = resolve_target(
        env=os.environ,
        template_project=template.project,
        template_location=template.location,
        template_bucket=template.staging_bucket,
        project=project,
        location=location,
        staging_bucket=bucket,
        api_endpoint=endpoint,
        transport=transport,
    )
    updated = template.model_copy(
        update={
            "project": target.project,
            "location": target.location,
            "staging_bucket": target.staging_bucket,
        }
    )
    return updated, target


def _image_for(template: JobTemplate, *, dry_run: bool) -> str | None:
    """The container image of a `build` template: its content-addressed URI (dry run), or built and pushed
    unless that tag exists already (vertexdist.container, issue 6)."""
    if template.build is None:
        return None
    from vertexdist.container.ensure import ensure_image, plan_build

    if dry_run:
        return plan_build(template).image_uri
    return ensure_image(template, log=lambda line: typer.echo(line, err=True)).image_uri


def _confirm_duplicate(backend: VertexBackend, submission: Submission, yes: bool) -> None:
    duplicates = backend.recent_duplicates(submission, DUPLICATE_WINDOW_S)
    if not duplicates or yes:
        return
    first = duplicates[0]
    message = (
        f"the same request was submitted {len(duplicates)} time(s) in the last {DUPLICATE_WINDOW_S / 60:.0f}"
        f" minutes, latest {first.name} ({first.state})"
    )
    if sys.stdin.isatty():
        typer.echo(f"warning: {message}", err=True)
        if typer.confirm("submit it again?", default=False, err=True):
            return
        raise VertexdistError(
            "not submitted", hint=f"follow the existing job: vertexdist status {first.name}"
        )
    raise VertexdistError(f"{message}; refusing to create a duplicate", hint="pass --yes to submit it anyway")


def _upload(backend: VertexBackend, submission: Submission) -> None:
    if submission.package_path is None:
        return
    size = submission.package_path.stat().st_size
    if sys.stderr.isatty():
        from rich.progress import DownloadColumn, Progress, TransferSpeedColumn

        with Progress(
            *Progress.get_default_columns(), DownloadColumn(), TransferSpeedColumn(), transient=True
        ) as bar:
            task = bar.add_task(f"uploading {submission.package_path.name}", total=size)
            uploaded = backend.upload(submission, lambda done, total: bar.update(task, completed=done))
    else:
        uploaded = backend.upload(submission)
    verb = "uploaded" if uploaded else "unchanged, already in the bucket:"
    typer.echo(f"package {verb} {submission.package_uri} ({size / 1024:.1f} KiB)", err=True)


def follow_job(backend: VertexBackend, name: str, *, follow_logs: bool) -> JobStatus:
    """Poll until the job ends with a live status view (and its logs on stdout with `follow_logs`)."""
    from vertexdist.backends.watch import PollPolicy, watch

    # Local jobs change state within seconds; Vertex jobs within minutes, so back off further there.
    policy = PollPolicy(max_s=1.0) if backend.target.is_emulator else PollPolicy()
    view = _StatusView(name, live=sys.stderr.isatty() and not follow_logs)

    def show(chunk: LogChunk, status: JobStatus) -> None:
        print_chunk(chunk, status, as_json=False)

    try:
        return watch(
            backend, name, on_status=view.update, on_logs=show if follow_logs else None, policy=policy
        )
    finally:
        view.close()


def submit(
    template: Path = typer.Argument(..., help="The job template (YAML)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the exact request and send nothing."),
    emulator: bool = typer.Option(False, "--emulator", help="Run a local Vertex emulator for this command."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Stream the replica logs until the job ends."),
    detach: bool = typer.Option(False, "--detach", help="Return once the job is created; do not wait."),
    yes: bool = typer.Option(
        False, "--yes", "-y", help="Submit even if the same request was just submitted."
    ),
    project: str | None = typer.Option(None, "--project", help="Override the template's project."),
    location: str | None = typer.Option(None, "--location", help="Override the template's location."),
    staging_bucket: str | None = typer.Option(None, "--staging-bucket", help="Override the staging bucket."),
    endpoint: str | None = ENDPOINT,
    transport: str | None = TRANSPORT,
    procs_per_replica: int = typer.Option(
        1, "--procs-per-replica", min=1, help="With --emulator: worker processes per replica."
    ),
    emulator_data_dir: Path = typer.Option(
        EMULATOR_DATA_DIR,
        "--emulator-data-dir",
        help="With --emulator: where jobs, logs and outputs are kept.",
    ),
) -> None:
    """Package TEMPLATE's trainer, upload it, create the Vertex training job and follow it to the end."""
    from vertexdist.spec import load_template

    if emulator and detach:
        raise UsageError(
            "--emulator runs only while the command runs",
            hint="drop --detach, or start one: vertexdist emulator start",
        )
    loaded = load_template(template)
    if emulator and loaded.build is not None:
        # No Docker here: like local-run, the emulator runs the same trainer as a Python package.
        typer.echo("emulator: `build` ignored; the trainer runs as a Python package", err=True)
        loaded = loaded.model_copy(update={"build": None})
    with ExitStack() as stack:
        if emulator and not dry_run:
            from vertexdist.emulator import Emulator

            emu = stack.enter_context(
                Emulator(data_dir=emulator_data_dir, procs_per_replica=procs_per_replica)
            )
            endpoint, transport = emu.vertex_endpoint, "rest"
            os.environ["STORAGE_EMULATOR_HOST"] = emu.storage_endpoint
            stack.callback(os.environ.pop, "STORAGE_EMULATOR_HOST", None)
            typer.echo(f"emulator: {emu.vertex_endpoint} (storage {emu.storage_endpoint})", err=True)
            typer.echo(f"emulator: jobs, logs and outputs (gs:// paths) under {emu.data_dir}", err=True)
        t, target = _apply_target(
            loaded,
            project=project,
            location=location,
            bucket=staging_bucket,
            endpoint=endpoint,
            transport=transport,
        )
        _submit(
            t,
            target,
            dry_run=dry_run,
            follow=follow,
            detach=detach,
            yes=yes,
            in_process=emulator,
        )


def _submit(
    t: JobTemplate,
    target: Target,
    *,
    dry_run: bool,
    follow: bool,
    detach: bool,
    yes: bool,
    in_process: bool,
) -> None:
    from vertexdist.backends.vertex import VertexBackend
    from vertexdist.render import mask_secrets

    backend = VertexBackend(target)
    submission = backend.dryrun(t, image_uri=_image_for(t, dry_run=dry_run))
    if dry_run:
        typer.echo(json.dumps(mask_secrets(submission.request), indent=2))
        return
    if not in_process:  # an in-process emulator's duplicates cost nothing and vanish with the command
        _confirm_duplicate(backend, submission, yes)
    _upload(backend, submission)
    name = backend.schedule(submission)
    typer.echo(name)
    if detach:
        typer.echo(f"follow it: vertexdist status {name}", err=True)
        return
    try:
        final = follow_job(backend, name, follow_logs=follow)
    except KeyboardInterrupt:
        if not target.is_emulator:
            typer.echo(
                f"\nstopped following; the job keeps running. cancel it: vertexdist cancel {name}", err=True
            )
        raise
    if final.state != "SUCCEEDED":
        raise JobFailedError(
            f"job {final.state}: {final.error or 'no error message'}",
            hint=f"see its logs: vertexdist logs {name}" if not target.is_emulator else None,
        )
    typer.echo(f"job SUCCEEDED: {final.display_name}", err=True)


def register(app: typer.Typer) -> None:
    app.command("submit")(submit)
