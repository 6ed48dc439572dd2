"""`vertexdist managed list|status|logs|cancel|resume`, and `submit --managed`: flags and printing only; the
work is `vertexdist.managed.service`'s (docs/guide/managed-jobs.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from vertexdist.errors import JobFailedError, UsageError

if TYPE_CHECKING:
    from vertexdist.jobs.submit import Where
    from vertexdist.managed.store import Managed, Store

app = typer.Typer(
    help="Managed jobs (`submit --managed`): list, read, show logs, cancel, or continue one whose controller"
    " stopped.",
    no_args_is_help=True,
)


def _notice(line: str) -> None:
    typer.echo(line, err=True)


def _ended(managed: Managed) -> None:
    if managed.state != "SUCCEEDED":
        raise JobFailedError(
            f"managed {managed.id} {managed.state}: {managed.why}",
            hint=f"see its attempts: vertexdist managed status {managed.id}",
        )
    typer.echo(f"managed {managed.id} SUCCEEDED", err=True)


def _drive(store: Store, managed_id: str, *, detach: bool) -> None:
    from vertexdist.managed.service import drive, drive_in_background

    if store.get(managed_id).backend == "local" and not detach:
        from vertexdist.cli.local_managed import drive_local
        from vertexdist.jobs.local_attempts import LocalAttempts
        from vertexdist.managed.service import attempt_backend

        attempts = attempt_backend(store.get(managed_id))
        assert isinstance(attempts, LocalAttempts)
        drive_local(store, managed_id, attempts)
        return
    if detach:
        started = drive_in_background(store, managed_id)
        if not started.started:
            raise JobFailedError(
                f"managed {managed_id}: the controller could not start the attempt: {started.why}",
                hint=f"its log: {started.log}; see it: vertexdist managed status {managed_id}",
            )
        typer.echo(f"controller running in the background; its log: {started.log}", err=True)
        typer.echo(f"see it: vertexdist managed status {managed_id}", err=True)
        return
    try:
        _ended(drive(store, managed_id, _notice))
    except KeyboardInterrupt:
        typer.echo(
            "\ncontroller stopped; the running attempt goes on. continue it: "
            f"vertexdist managed resume {managed_id}",
            err=True,
        )
        raise


def submit_managed(template: Path, where: Where, *, detach: bool) -> None:
    """`submit TEMPLATE --managed`: record the managed job, print its id first, then drive it."""
    from vertexdist.managed.service import open_store, start

    store = open_store()
    managed = start(store, template, where)
    typer.echo(f"managed: {managed.id}")
    _drive(store, managed.id, detach=detach)


@app.command("list")
def list_managed() -> None:
    """Every managed job of this folder, newest first."""
    from vertexdist.managed.service import open_store, shown_state

    store = open_store()
    for managed in store.all():
        attempts = store.attempts(managed.id)
        last = attempts[-1].reason if attempts else "-"
        state = shown_state(store, managed)
        typer.echo(f"{managed.id}  {state:<9}  {len(attempts)} attempt(s), last {last}  {managed.template}")


@app.command("status")
def status(
    managed_id: str = typer.Argument(..., metavar="ID", help="The managed job's id (`managed: ID`)."),
    as_json: bool = typer.Option(False, "--json", help="Print it as JSON."),
) -> None:
    """A managed job's state and every attempt: its job, place, state and reason."""
    from vertexdist.managed.service import STOPPED, open_store
    from vertexdist.managed.service import status as read_status

    store = open_store()
    found = read_status(store, managed_id)
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return
    typer.echo(f"{found['id']}  {found['state']}  {found['template']}")
    why = store.get(managed_id).why
    if found["state"] == STOPPED:
        typer.echo(f"  no controller drives it; continue it: vertexdist managed resume {managed_id}")
    elif why:
        typer.echo(f"  {why}")
    attempts = found["attempts"]
    assert isinstance(attempts, list)
    for number, a in enumerate(attempts, start=1):
        typer.echo(
            f"  {number}. {a['reason']:<10} {a['state']:<9} {a['location']} {a['machine_type']}"
            f" {a['scheduling_strategy'] or 'STANDARD'}  {a['job'] or '(no job)'}"
        )


@app.command("logs")
def logs(
    managed_id: str = typer.Argument(..., metavar="ID", help="The managed job's id (`managed: ID`)."),
    follow: bool = typer.Option(
        False,
        "--follow",
        "-f",
        help="Keep streaming, attempt after attempt, until the managed job ends (Ctrl-C stops).",
    ),
    replica: str | None = typer.Option(
        None, "--replica", help="Only this replica's lines, e.g. workerpool1-0 (default the chief's)."
    ),
    attempt: int | None = typer.Option(None, "--attempt", help="Only this attempt's logs (from 1)."),
    as_json: bool = typer.Option(False, "--json", help="Print each header and line as JSON."),
) -> None:
    """A managed job's logs across its attempts, each introduced by a header line. With --follow, exits 0
    when it SUCCEEDED, 1 when it FAILED or was CANCELLED (with --attempt, that attempt's job), or when no
    controller drives it any more."""
    from vertexdist.cli.job_view import print_chunk
    from vertexdist.managed.logs import AttemptEnd, AttemptHeader, managed_logs
    from vertexdist.managed.service import open_store

    store = open_store()
    last: AttemptEnd | None = None
    for item in managed_logs(store, managed_id, attempt=attempt, replica=replica, follow=follow):
        if isinstance(item, AttemptHeader):
            typer.echo(json.dumps(item.to_dict()) if as_json else item.line)
        elif isinstance(item, AttemptEnd):
            last = item
        else:
            print_chunk(item.chunk, item.status, as_json=as_json)
    if not follow:
        return
    if attempt is not None:
        state = last.status.state if last is not None and last.status is not None else "FAILED"
        if state != "SUCCEEDED":
            raise JobFailedError(
                f"attempt {attempt} of {managed_id} {state}",
                hint=f"see its attempts: vertexdist managed status {managed_id}",
            )
        return
    _ended(store.get(managed_id))


@app.command("cancel")
def cancel(managed_id: str = typer.Argument(..., metavar="ID", help="The managed job's id.")) -> None:
    """Cancel the running attempt's job and stop: no further attempt is made."""
    from vertexdist.managed.service import cancel_managed, open_store

    typer.echo(cancel_managed(open_store(), managed_id).line)


@app.command("resume")
def resume(
    managed_id: str = typer.Argument(..., metavar="ID", help="The managed job's id."),
    follow: bool = typer.Option(
        False, "--follow", "-f", help="Print each transition until it ends (default)."
    ),
    detach: bool = typer.Option(False, "--detach", help="Continue it in the background."),
) -> None:
    """Continue a managed job whose controller stopped (killed, interrupted): never a second job for an
    attempt whose create already reached Vertex."""
    from vertexdist.managed.service import open_store

    if follow and detach:
        raise UsageError("--follow and --detach exclude each other", hint="pick one")
    store = open_store()
    managed = store.get(managed_id)
    if managed.done:
        typer.echo(f"managed {managed.id} has ended: {managed.state} ({managed.why})", err=True)
        _ended(managed)
        return
    _drive(store, managed_id, detach=detach)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="managed")
