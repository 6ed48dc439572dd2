"""`vertexdist submit TEMPLATE`: package, upload, create the TrainingPipeline, then follow it.

The request sent is exactly what `--dry-run` prints (and `vertexdist render --request` shows, plus the
real package URI and the request-hash label), with one field filled in when the job is created: its own
output folder, `<job-folder>` in the dry run, becomes a fresh UTC-time-and-random folder (printed as
`outputs:`). `--resume-from JOB` continues that earlier job's folder instead, dry run included.
The SDK's blocking `run()` polls every 5 s; this polls with backoff from 0.2 s. `--emulator` runs a local
Vertex + Cloud Storage in-process for the command's length.
"""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from vertexdist.cli.resume import ResumeFrom
from vertexdist.cli.submit_view import confirm_duplicate, follow_job, submitted_where, upload
from vertexdist.cli.targets import Endpoint, Location, Project, Transport, vertex_backend
from vertexdist.errors import JobFailedError, UsageError

if TYPE_CHECKING:
    from vertexdist.backends.config import Target
    from vertexdist.spec.models import JobTemplate

DUPLICATE_WINDOW_S = 600.0
EMULATOR_DATA_DIR = Path(".vertexdist/emulator")


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


def submit(
    template: Path = typer.Argument(..., help="The job template (YAML)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the exact request and send nothing."),
    emulator: bool = typer.Option(False, "--emulator", help="Run a local Vertex emulator for this command."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Stream the replica logs until the job ends."),
    detach: bool = typer.Option(False, "--detach", help="Return once the job is created; do not wait."),
    yes: bool = typer.Option(
        False, "--yes", "-y", help="Submit even if the same request was just submitted."
    ),
    project: Project = None,
    location: Location = None,
    staging_bucket: str | None = typer.Option(None, "--staging-bucket", help="Override the staging bucket."),
    endpoint: Endpoint = None,
    transport: Transport = None,
    procs_per_replica: int | None = typer.Option(
        None,
        "--procs-per-replica",
        min=1,
        help="With --emulator: worker processes per replica (default: the machine's GPUs, 1 without;"
        " as local-run).",
    ),
    emulator_data_dir: Path = typer.Option(
        EMULATOR_DATA_DIR,
        "--emulator-data-dir",
        help="With --emulator: where jobs, logs and outputs are kept.",
    ),
    resume_from: ResumeFrom = None,
) -> None:
    """Package TEMPLATE's trainer, upload it, create the Vertex training job and follow it to the end."""
    from vertexdist.spec import load_template

    if emulator and detach:
        raise UsageError(
            "--emulator runs only while the command runs",
            hint="drop --detach, or start one: vertexdist emulator start",
        )
    if procs_per_replica is not None and not emulator:
        raise UsageError(
            f"--procs-per-replica {procs_per_replica} applies to jobs the emulator runs: Vertex starts what"
            " the template says (trainer.nproc_per_node, else one process per GPU)",
            hint="add --emulator, or set trainer.nproc_per_node in the template",
        )
    loaded = load_template(template)
    if emulator:
        from vertexdist.local.template_job import check_procs_per_replica

        check_procs_per_replica(loaded, procs_per_replica)
    if emulator and loaded.build is not None:
        # No Docker here: like local-run, the emulator runs the same trainer as a Python package.
        typer.echo("emulator: `build` ignored; the trainer runs as a Python package", err=True)
        loaded = loaded.model_copy(update={"build": None})
    # A job to resume is looked up on the emulator, so a dry run needs it running too.
    needs_emulator = not dry_run or (resume_from is not None and not resume_from.startswith("gs://"))
    with ExitStack() as stack:
        if emulator and needs_emulator:
            from vertexdist.emulator import Emulator

            emu = stack.enter_context(
                Emulator(
                    data_dir=emulator_data_dir,
                    procs_per_replica=procs_per_replica,
                )
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
        resumed = None
        if resume_from is not None:
            from vertexdist.cli.resume import resume_output_dir

            resumed = resume_output_dir(
                resume_from,
                project=target.project,
                location=target.location,
                endpoint=target.api_endpoint,
                transport=target.api_transport,
            )
        _submit(
            t,
            target,
            dry_run=dry_run,
            follow=follow,
            detach=detach,
            yes=yes,
            in_process=emulator,
            resume_from=resumed,
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
    resume_from: str | None = None,
) -> None:
    from vertexdist.render import mask_secrets

    backend = vertex_backend(target)
    submission = backend.dryrun(t, image_uri=_image_for(t, dry_run=dry_run), resume_from=resume_from)
    if dry_run:
        typer.echo(json.dumps(mask_secrets(submission.request), indent=2))
        return
    if not in_process:  # an in-process emulator's duplicates cost nothing and vanish with the command
        confirm_duplicate(backend, submission, yes, DUPLICATE_WINDOW_S)
    upload(backend, submission)
    submission = submission.for_new_job()
    name = backend.schedule(submission)
    typer.echo(name)
    resumed = " (the earlier job's folder, resumed)" if resume_from else ""
    typer.echo(f"outputs: {submission.output_dir}{resumed}", err=True)
    if not in_process:  # an in-process emulator's jobs are read where it said, after it stopped
        for line in submitted_where(name, target):
            typer.echo(line, err=True)
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
