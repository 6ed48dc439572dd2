"""`local-run TEMPLATE` of a template with `recovery:`, and `managed resume ID` of such a managed job: the
managed-job controller over local runs (`vertexdist.jobs.local_attempts`). Flags and printing only.

Ctrl-C (or SIGTERM) cancels the running attempt; once its processes have stopped the command exits 130.
"""

from __future__ import annotations

import contextlib
import queue
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import typer

from vertexdist.errors import JobFailedError

if TYPE_CHECKING:
    from vertexdist.backends.base import JobEvent
    from vertexdist.jobs.local_attempts import LocalAttempts
    from vertexdist.jobs.local_faults import LocalFaults
    from vertexdist.jobs.local_run import LocalRun
    from vertexdist.managed.store import Store

POLL_S = 0.25
VIEW_JOIN_S = 5.0  # an attempt's view prints its last lines after its job has ended


def _notice(line: str) -> None:
    typer.echo(line, err=True)


def _show(run: LocalRun, events: queue.Queue[JobEvent]) -> threading.Thread:
    """The attempt's live view, as a plain `local-run` shows it (a table on a terminal, prefixed lines
    otherwise), fed from a thread of its own while the controller watches the attempt."""
    from vertexdist.cli.local_view import choose_view
    from vertexdist.jobs.local_run import follow_local
    from vertexdist.render import mask_text

    secrets = run.secret_values
    view = choose_view(run.name, run.run_dir, json_events=False)

    def follow() -> None:
        with contextlib.suppress(Exception):  # a view that fails (stdout closed) cancels its job
            follow_local(run.job, view, events, mask=lambda text: mask_text(text, secrets))

    thread = threading.Thread(target=follow, name=f"view-{run.name}", daemon=True)
    thread.start()
    return thread


def drive_local(store: Store, managed_id: str, attempts: LocalAttempts) -> None:
    """Drive the managed job here until it ends, each attempt's replicas shown live; exit 0 when an attempt
    succeeded, 130 when interrupted."""
    from vertexdist.jobs.attempt_pool import AttemptPool
    from vertexdist.managed import store as st
    from vertexdist.managed.service import drive

    views: list[threading.Thread] = []

    def stop(_signum: int, _frame: FrameType | None) -> None:
        attempts.interrupt()

    attempts.on_run = lambda run, events: views.append(_show(run, events))
    if attempts.pool is None and not (attempts.place.warm or attempts.place.docker):
        # A recovery starts warm: the next attempt's replicas fork from this pool (`jobs.attempt_pool`).
        attempts.pool = AttemptPool().start()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        managed = drive(store, managed_id, _notice, poll_s=POLL_S, backend=attempts)
        attempts.wait()
        for view in views:
            view.join(timeout=VIEW_JOIN_S)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if attempts.pool is not None:
            attempts.pool.stop()
    tried = store.attempts(managed_id)
    last = tried[-1] if tried else None
    summary = attempts.summary(last.job) if last is not None and last.job else None
    if summary is not None and summary.get("output_path"):
        typer.echo(f"outputs: {summary['output_path']}", err=True)
    from vertexdist.jobs.goodput import end_of_run_line

    line = end_of_run_line(managed.id)  # across the attempts (docs/guide/goodput.md)
    if line is not None:
        typer.echo(line, err=True)
    if managed.state == st.CANCELLED:
        typer.echo(f"managed {managed.id} CANCELLED", err=True)
        raise typer.Exit(130)
    if managed.state != st.SUCCEEDED:
        raise JobFailedError(
            f"managed {managed.id} {managed.state}: {managed.why}",
            hint=f"see its attempts: vertexdist managed status {managed.id}",
        )
    typer.echo(f"managed {managed.id} SUCCEEDED", err=True)


def local_managed(
    template: Path,
    *,
    runs_dir: Path,
    procs_per_replica: int | None,
    docker: bool,
    warm: bool,
    grace_s: float,
    timeout_s: float | None,
    faults: LocalFaults | None,
) -> None:
    """Record the managed job, print `managed: ID` first, then run its attempts here."""
    import dataclasses

    from vertexdist.jobs.local_attempts import LocalAttempts, LocalPlace
    from vertexdist.managed.service import open_store, start_local

    place = LocalPlace(
        runs_dir=str(runs_dir.resolve()),
        procs_per_replica=procs_per_replica,
        docker=docker,
        warm=warm,
        grace_s=grace_s,
        timeout_s=timeout_s,
    )
    store = open_store()
    managed = start_local(store, template, dataclasses.asdict(place))
    typer.echo(f"managed: {managed.id}")
    drive_local(store, managed.id, LocalAttempts(place, faults))
