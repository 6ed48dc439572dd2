"""`vertexdist submit TEMPLATE`: package, upload, create the TrainingPipeline, then follow it.

The request sent is exactly what `--dry-run` prints (and `vertexdist render --request` shows, plus the
real package URI and the request-hash label), with one field filled in when the job is created: its own
output folder, `<job-folder>` in the dry run, becomes a fresh UTC-time-and-random folder (printed as
`outputs:`). `--resume-from JOB` continues that earlier job's folder instead, dry run included.
The SDK's blocking `run()` polls every 5 s; this polls with backoff from 0.2 s. `--emulator` submits to the
emulator serving its folder, else runs a local Vertex + Cloud Storage in-process for the command's length.
Flags and printing only: the work is `vertexdist.jobs.submit`'s.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from vertexdist.cli.resume import ResumeFrom
from vertexdist.cli.submit_view import follow_job, submit_hooks, submitted_where
from vertexdist.cli.targets import Endpoint, Location, Project, Transport
from vertexdist.errors import JobFailedError, UsageError

if TYPE_CHECKING:
    from vertexdist.jobs.submit import SubmitSession

EMULATOR_DATA_DIR = Path(".vertexdist/emulator")


def submit(
    template: Path = typer.Argument(..., help="The job template (YAML)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the exact request and send nothing."),
    emulator: bool = typer.Option(
        False,
        "--emulator",
        help="Submit to the emulator serving --emulator-data-dir (`vertexdist emulator start`), else run"
        " one for this command.",
    ),
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
    check_resource: bool = typer.Option(
        True,
        "--check-resource/--no-check-resource",
        help="Read the template's persistent_resource_id first and refuse a job that does not fit it"
        " (as validate --check-resources).",
    ),
    managed: bool = typer.Option(
        False,
        "--managed",
        help="Run a controller that makes a new attempt after a preemption, stockout or quota refusal "
        "(the template's `recovery:`); first line `managed: ID`.",
    ),
) -> None:
    """Package TEMPLATE's trainer, upload it, create the Vertex training job and follow it to the end."""
    from vertexdist.jobs.submit import (
        InProcessEmulator,
        SubmitRequest,
        Where,
        open_submission,
        serving_emulator,
    )
    from vertexdist.spec import load_template

    if emulator and detach and serving_emulator(emulator_data_dir) is None:
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
    if managed:
        # A started emulator outlives this command, as a managed job must: its endpoint, as --endpoint's.
        served = serving_emulator(emulator_data_dir) if emulator else None
        _refuse_with_managed(emulator=emulator and served is None, dry_run=dry_run, resume_from=resume_from)
        from vertexdist.cli.managed import submit_managed

        if served is not None:
            endpoint, transport = served.vertex, "rest"
        submit_managed(template, Where(project, location, staging_bucket, endpoint, transport), detach=detach)
        return
    request = SubmitRequest(
        load_template(template),
        Where(project, location, staging_bucket, endpoint, transport),
        emulator=InProcessEmulator(emulator_data_dir, procs_per_replica) if emulator else None,
        resume_from=resume_from,
        allow_duplicate=yes,
        check_resource=check_resource,
    )
    with open_submission(request, submit_hooks(), dry_run=dry_run) as session:
        if dry_run:
            from vertexdist.render import mask_secrets

            typer.echo(json.dumps(mask_secrets(session.dryrun().request), indent=2))
            return
        from vertexdist.jobs.where import JobPlace

        flags = JobPlace(emulator_dir=emulator_data_dir).flags if emulator else ""
        _submit(
            session,
            follow=follow,
            detach=detach,
            flags=flags,
            emulator_dir=emulator_data_dir if emulator else None,
        )


def _refuse_with_managed(*, emulator: bool, dry_run: bool, resume_from: str | None) -> None:
    if emulator:
        raise UsageError(
            "--managed with --emulator: the in-process emulator stops with this command, and a managed job"
            " must outlive its controller",
            hint="start one in another shell (vertexdist emulator start), or drop --managed",
        )
    if dry_run:
        raise UsageError(
            "--managed with --dry-run", hint="drop --managed: the first attempt's request is the same"
        )
    if resume_from is not None:
        raise UsageError(
            "--managed with --resume-from", hint="continue a managed job with: vertexdist managed resume ID"
        )


def _submit(
    session: SubmitSession, *, follow: bool, detach: bool, flags: str, emulator_dir: Path | None = None
) -> None:
    job = session.submit()
    name, target = job.name, session.target
    typer.echo(name)
    resumed = " (the earlier job's folder, resumed)" if job.resumed else ""
    typer.echo(f"outputs: {job.output_dir}{resumed}", err=True)
    if not session.in_process:  # an in-process emulator's jobs are read once it has stopped: see below
        for line in submitted_where(name, target, flags=flags):
            typer.echo(line, err=True)
    if detach:
        typer.echo(f"follow it: vertexdist status {name}{flags}", err=True)
        return
    try:
        final = follow_job(session, name, follow_logs=follow)
    except KeyboardInterrupt:
        if not session.in_process:  # an emulator started for this command cancels the job, and says so
            where = " on the emulator" if target.is_emulator else ""
            cancel = f"vertexdist cancel {name}{flags}"
            typer.echo(f"\nstopped following; the job keeps running{where}. cancel it: {cancel}", err=True)
        raise
    if session.in_process:
        # The emulator stops with this command; its folder keeps the job for these.
        for line in submitted_where(name, target, flags=flags, done=True):
            typer.echo(line, err=True)
    if follow:
        _goodput_line(session, name, flags, emulator_dir)
    if final.state != "SUCCEEDED":
        raise JobFailedError(
            f"job {final.state}: {final.error or 'no error message'}",
            hint=f"see its logs: vertexdist logs {name}{flags}",
        )
    typer.echo(f"job SUCCEEDED: {final.display_name}", err=True)
    if session.template.model is not None:
        from vertexdist.jobs.registered_model import uploaded_model

        model = uploaded_model(session.backend, name)
        if model is not None:
            typer.echo(f"{model[0]}@{model[1]}")
            typer.echo(f"registered model {model[0]} version {model[1]}", err=True)


def _goodput_line(session: SubmitSession, name: str, flags: str, emulator_dir: Path | None) -> None:
    """The job's goodput, its biggest loss and that loss's cost (docs/guide/goodput.md), on stderr: the
    heartbeats from an in-process emulator's folder, else from the job's logs."""
    from vertexdist.jobs.goodput import end_of_run_line
    from vertexdist.jobs.ranks import heartbeat_folder
    from vertexdist.jobs.where import JobPlace

    folder = None
    if emulator_dir is not None:
        with contextlib.suppress(Exception):
            folder = heartbeat_folder(name, JobPlace(emulator_dir=emulator_dir))
    line = end_of_run_line(name, backend=session.backend, folder=folder, shown=f"{name}{flags}")
    if line is not None:
        typer.echo(line, err=True)


def register(app: typer.Typer) -> None:
    app.command("submit")(submit)
