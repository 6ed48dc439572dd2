"""`vertexdist outputs JOB [--download DIR]`: the files under a job's output folder (model, checkpoints,
metrics) with their sizes, and a resumable, checked copy of them (`backends.download`).

JOB is a Vertex (or emulator) job, read through google-cloud-storage, or a local-run job id or run folder,
read from the run folder. The folder is the job's own `baseOutputDirectory`, from its spec.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from vertexdist.cli.jobs import AnyJobRef, place
from vertexdist.cli.outputs_view import empty_outputs_line, show_download
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
from vertexdist.jobs.where import open_job
from vertexdist.sizes import human_size


def outputs(
    job: AnyJobRef,
    download: Path | None = typer.Option(
        None,
        "--download",
        help="Copy the files into this folder (an interrupted copy resumes; unchanged files are skipped).",
    ),
    project: JobProject = None,
    location: JobLocation = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """List a job's outputs (its base output directory) with sizes, or download them."""
    at = place(project, location, endpoint, transport, emulator, emulator_data_dir)
    with open_job(job, at) as (backend, name):
        source = backend.outputs(name)
        files = source.files()
        if download is not None:
            show_download(source, files, download, as_json=as_json)
            return
        status = None if files or as_json else backend.describe(name)
    if as_json:
        listed = [{"path": f.path, "size": f.size, "md5Hash": f.md5, "crc32c": f.crc32c} for f in files]
        typer.echo(json.dumps({"uri": f"{source.uri}/", "files": listed}, indent=2))
        return
    total = sum(f.size for f in files)
    typer.echo(f"{source.uri}/  {len(files)} file(s), {human_size(total)}")
    width = max((len(f.path) for f in files), default=0)
    for f in files:
        typer.echo(f"  {f.path:<{width}}  {human_size(f.size):>10}")
    if not files:
        typer.echo(f"  {empty_outputs_line(status)}", err=True)


def register(app: typer.Typer) -> None:
    app.command("outputs")(outputs)
