"""What `submit` shows while it works: the upload's progress bar and the job's state, on stderr (a live
spinner line on a terminal, one line per change otherwise); `--follow` streams the replica logs on stdout."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

import typer

from vertexdist.cli.job_view import print_chunk
from vertexdist.errors import VertexdistError
from vertexdist.sizes import human_size

if TYPE_CHECKING:
    from vertexdist.backends.base import JobStatus, LogChunk
    from vertexdist.backends.config import Target
    from vertexdist.backends.vertex import Submission, VertexBackend


class StatusView:
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


def confirm_duplicate(backend: VertexBackend, submission: Submission, yes: bool, window_s: float) -> None:
    """Ask before submitting a request that was just submitted; without a terminal, refuse unless --yes."""
    duplicates = backend.recent_duplicates(submission, window_s)
    if not duplicates or yes:
        return
    first = duplicates[0]
    message = (
        f"the same request was submitted {len(duplicates)} time(s) in the last {window_s / 60:.0f}"
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


def upload(backend: VertexBackend, submission: Submission) -> None:
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
    typer.echo(f"package {verb} {submission.package_uri} ({human_size(size)})", err=True)


def follow_job(backend: VertexBackend, name: str, *, follow_logs: bool) -> JobStatus:
    """Poll until the job ends with a live status view (and its logs on stdout with `follow_logs`)."""
    from vertexdist.backends.watch import CLOUD_LOGGING_POLICY, PollPolicy, watch

    # Local jobs change state within seconds; Vertex jobs within minutes, so back off further there.
    policy = PollPolicy(max_s=1.0) if backend.target.is_emulator else PollPolicy()
    if follow_logs and not backend.target.is_emulator:
        policy = CLOUD_LOGGING_POLICY
    view = StatusView(name, live=sys.stderr.isatty() and not follow_logs)

    def show(chunk: LogChunk, status: JobStatus) -> None:
        print_chunk(chunk, status, as_json=False)

    try:
        return watch(
            backend, name, on_status=view.update, on_logs=show if follow_logs else None, policy=policy
        )
    finally:
        view.close()


def submitted_where(name: str, target: Target) -> list[str]:
    """The commands that fetch the new job's outputs and show its logs, and its console page on Vertex."""
    from vertexdist.backends.vertex.status import console_url

    lines = [f"  vertexdist outputs {name} --download DIR", f"logs: vertexdist logs {name} --follow"]
    link = console_url(name, target)
    if link:
        lines.append(f"console: {link}")
    return lines
