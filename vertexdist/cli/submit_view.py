"""What `submit` shows while it works: the upload's progress bar and the job's state, on stderr (a live
spinner line on a terminal, one line per change otherwise); `--follow` streams the replica logs on stdout."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer

from vertexdist.cli.job_view import print_chunk
from vertexdist.errors import VertexdistError
from vertexdist.jobs.submit import DuplicateRequest
from vertexdist.sizes import human_size

if TYPE_CHECKING:
    from vertexdist.backends.base import JobStatus, LogChunk, ProgressFn
    from vertexdist.backends.config import Target
    from vertexdist.backends.vertex import Submission
    from vertexdist.jobs.submit import SubmitHooks, SubmitSession


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


def _confirm_duplicate(duplicates: list[JobStatus], message: str) -> None:
    """Ask before submitting a request that was just submitted; without a terminal, refuse unless --yes."""
    if sys.stdin.isatty():
        typer.echo(f"warning: {message}", err=True)
        if typer.confirm("submit it again?", default=False, err=True):
            return
        raise VertexdistError(
            "not submitted", hint=f"follow the existing job: vertexdist status {duplicates[0].name}"
        )
    raise DuplicateRequest(
        f"{message}; refusing to create a duplicate", hint="pass --yes to submit it anyway"
    )


def _bar_console() -> Any:
    """Where the upload bar draws: the terminal's stderr."""
    from rich.console import Console

    return Console(stderr=True)


@contextmanager
def _upload_bar(submission: Submission) -> Iterator[ProgressFn | None]:
    """A progress bar on a terminal while the package uploads, drawn once the first bytes go up: a package
    already in the bucket gets none."""
    assert submission.package_path is not None
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import DownloadColumn, Progress, TransferSpeedColumn

    size = submission.package_path.stat().st_size
    name = submission.package_path.name
    drawn: list[tuple[Progress, Any]] = []

    def report(done: int, total: int) -> None:
        if not drawn:
            bar = Progress(
                *Progress.get_default_columns(),
                DownloadColumn(),
                TransferSpeedColumn(),
                transient=True,
                console=_bar_console(),
            )
            bar.start()
            drawn.append((bar, bar.add_task(f"uploading {name}", total=size)))
        bar, task = drawn[0]
        bar.update(task, completed=done)

    try:
        yield report
    finally:
        if drawn:
            drawn[0][0].stop()


def _uploaded(submission: Submission, uploaded: bool) -> None:
    assert submission.package_path is not None
    size = submission.package_path.stat().st_size
    verb = "uploaded" if uploaded else "unchanged, already in the bucket:"
    typer.echo(f"package {verb} {submission.package_uri} ({human_size(size)})", err=True)


def _notice(line: str) -> None:
    typer.echo(line, err=True)


def submit_hooks() -> SubmitHooks:
    """What submit shows on stderr while the service works, and how it asks about a duplicate."""
    from vertexdist.jobs.submit import SubmitHooks

    return SubmitHooks(
        notice=_notice, on_duplicates=_confirm_duplicate, upload_progress=_upload_bar, on_uploaded=_uploaded
    )


def follow_job(session: SubmitSession, name: str, *, follow_logs: bool) -> JobStatus:
    """Follow the job until it ends with a live status view (and its logs on stdout with `follow_logs`)."""
    view = StatusView(name, live=sys.stderr.isatty() and not follow_logs)

    def show(chunk: LogChunk, status: JobStatus) -> None:
        print_chunk(chunk, status, as_json=False)

    try:
        return session.follow(name, on_status=view.update, on_logs=show if follow_logs else None)
    finally:
        view.close()


def submitted_where(name: str, target: Target, *, flags: str = "", done: bool = False) -> list[str]:
    """The commands that fetch the new job's outputs, show its logs (its trials, for a tuning job) and
    state, and its console page on Vertex; `flags` (` --emulator`) bring each back to where the job is."""
    from vertexdist.backends.vertex.status import console_url

    # Right after submit it continues the `outputs: gs://...` line above it; once the job has ended (after
    # --follow) it stands alone, so it says what it is, as the others do.
    fetch = f"vertexdist outputs {name}{flags} --download DIR"
    lines = [
        f"outputs: {fetch}" if done else f"  {fetch}",
        f"logs: vertexdist logs {name}{flags}" + ("" if done else " --follow"),
    ]
    if "/hyperparameterTuningJobs/" in name:
        lines.append(f"trials: vertexdist trials {name}{flags}")
    if done:
        lines.append(f"status: vertexdist status {name}{flags}")
    link = console_url(name, target)
    if link:
        lines.append(f"console: {link}")
    return lines
