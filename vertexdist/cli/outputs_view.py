"""What `outputs --download` shows: a progress bar over all bytes on a terminal (rich), a line per file
otherwise, and what was downloaded, continued and skipped."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from vertexdist.sizes import human_size

if TYPE_CHECKING:
    from vertexdist.backends.base import JobStatus
    from vertexdist.backends.download import DownloadReport
    from vertexdist.backends.outputs import OutputFile, OutputSource


def empty_outputs_line(status: JobStatus | None) -> str:
    """What an empty output folder means: nothing yet while the job runs, nothing at all once it ended."""
    if status is None or not status.done:
        return "(nothing yet: the job writes its model to <output folder>/model)"
    return (
        f"(none: the job ended {status.state} without writing any. A script writes its model under"
        " AIP_MODEL_DIR, a gs:// URI: as a path, /gcs/ + the rest)"
    )


def show_download(source: OutputSource, files: list[OutputFile], dest: Path, *, as_json: bool) -> None:
    from vertexdist.backends.download import download

    total = sum(f.size for f in files)
    if sys.stderr.isatty() and not as_json:
        from rich.progress import DownloadColumn, Progress, TransferSpeedColumn

        with Progress(
            *Progress.get_default_columns(), DownloadColumn(), TransferSpeedColumn(), transient=True
        ) as bar:
            task = bar.add_task(f"downloading {source.uri}/", total=total)

            def advance(file: OutputFile, done: int) -> None:
                bar.update(task, advance=done, description=file.path)

            report = download(source, files, dest, progress=advance)
    else:
        report = download(source, files, dest)
    _summary(report, source, dest, as_json=as_json)


def _summary(report: DownloadReport, source: OutputSource, dest: Path, *, as_json: bool) -> None:
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "uri": f"{source.uri}/",
                    "into": str(dest),
                    "downloaded": report.downloaded,
                    "skipped": report.skipped,
                    "resumed": report.resumed,
                    "bytes": report.bytes,
                },
                indent=2,
            )
        )
        return
    for path in report.downloaded:
        resumed = report.resumed.get(path)
        note = f" (continued from {human_size(resumed)})" if resumed else ""
        typer.echo(f"downloaded {path}{note}")
    for path in report.skipped:
        typer.echo(f"unchanged, skipped {path}")
    typer.echo(
        f"{len(report.downloaded)} downloaded ({human_size(report.bytes)}), {len(report.skipped)} already"
        f" there, into {dest}",
        err=True,
    )
