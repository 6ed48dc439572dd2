"""`vertexdist shell JOB [--replica R] [--command CMD]`: a shell in a live replica's environment
(`jobs.shell`). For a running local or emulator job: $SHELL (or /bin/sh) with the replica's variables, in its
working folder, seeing its `/gcs`; `--command` runs one command there instead and exits with its status. For
a Vertex job: the replica's interactive-shell URI (`enable_web_access: true`), or how to get one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
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
from vertexdist.errors import UsageError


def _local_shell(health_dir: Path, job: str, replica: str, command: str | None, flags: str = "") -> int:
    """`flags`: what a printed command adds to come back to the same place (` --emulator`)."""
    from vertexdist.jobs import shell as service

    found = service.find_replica(health_dir, replica)
    if found is None:
        raise UsageError(
            f"no running replica {replica} of {job}: the job has ended, that replica has not"
            " started, or no process of yours carries the job's token",
            hint=f"see its replicas: vertexdist status {job}{flags}",
        )
    nsenter = shutil.which("nsenter")
    argv, cwd = service.shell_argv(os.environ.get("SHELL") or "/bin/sh", command, found, nsenter)
    note = service.gcs_note(found, nsenter)
    if note and command is None:
        typer.echo(note, err=True)
    if command is None:
        typer.echo(
            f"a shell in {replica} of {job} (pid {found.pid}, {found.cwd}); `exit` leaves it", err=True
        )
    env = service.shell_env(found.env, os.environ, replica)
    return subprocess.call(argv, env=env, cwd=cwd)


def shell(
    job: Annotated[
        str, typer.Argument(help="A local-run job id or run folder, an emulator job, or a Vertex job.")
    ],
    replica: str = typer.Option("workerpool0-0", "--replica", "-r", help="The replica, e.g. workerpool1-0."),
    command: str | None = typer.Option(
        None, "--command", "-c", help="Run this command in the replica's environment instead of a shell."
    ),
    project: JobProject = None,
    location: JobLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
) -> None:
    """Open a shell in a live replica: its variables, working folder and /gcs (Vertex: its shell URI)."""
    from vertexdist.cli.jobs import place as job_place
    from vertexdist.jobs.find import local_job
    from vertexdist.jobs.ranks import health_dir
    from vertexdist.jobs.where import open_job

    place = job_place(project, location, endpoint, transport, emulator, emulator_data_dir)
    if emulator or local_job(job) is not None:
        flags = place.flags if emulator else ""
        raise typer.Exit(_local_shell(health_dir(job, place), job.strip(), replica, command, flags))
    from vertexdist.jobs import shell as service

    with open_job(job, place) as (backend, name):
        uris, enabled = service.web_access(backend, name)
    typer.echo(service.vertex_message(replica, uris, enabled))


def register(app: typer.Typer) -> None:
    app.command("shell")(shell)
