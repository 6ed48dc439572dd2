"""Managed jobs as calls the CLI (or a console) makes: start one, continue one after a kill, run it in the
background, list, read and cancel them. The CLI adds flags and printing.

A managed job's record keeps its template's path and the flags that said where it goes (`Where`), so
`resume` rebuilds the same controller; a lock file held while a controller runs keeps two from driving one
managed job at once.
"""

from __future__ import annotations

import dataclasses
import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from vertexdist.errors import UsageError
from vertexdist.managed import store as st
from vertexdist.managed.attempts import AttemptBackend, VertexAttempts
from vertexdist.managed.controller import Cancelled, Controller, cancel

if TYPE_CHECKING:
    from vertexdist.jobs.submit import Where

MANAGED_DIR = Path(".vertexdist/managed")


def open_store(root: Path = MANAGED_DIR) -> st.Store:
    return st.Store(root / "managed.sqlite")


def _where(target: Mapping[str, object]) -> Where:
    from vertexdist.jobs.submit import Where

    fields = {f.name for f in dataclasses.fields(Where)}
    return Where(**{k: v for k, v in target.items() if k in fields})  # type: ignore[arg-type]


def attempt_backend(managed: st.Managed, env: Mapping[str, str] = os.environ) -> AttemptBackend:
    """The attempts of the managed job's target kind: `vertex` (Vertex or an emulator), `local` (local runs,
    `local-run` of a template with `recovery:`; a fault plan is not applied again on resume)."""
    if managed.backend == "vertex":
        from vertexdist.jobs.submit import SubmitHooks

        return VertexAttempts(_where(managed.target), SubmitHooks(), dict(env))
    if managed.backend == "local":
        from vertexdist.jobs.local_attempts import LocalAttempts, LocalPlace

        return LocalAttempts(LocalPlace.from_target(managed.target))
    raise UsageError(
        f"managed job {managed.id}: no backend {managed.backend!r}", hint="one of: vertex, local"
    )


def start(store: st.Store, template: Path, where: Where) -> st.Managed:
    """Record a new managed job of `template` (its first attempt is planned when the controller runs)."""
    from vertexdist.spec import load_template

    load_template(template)  # a bad template is refused before anything is recorded
    target = dataclasses.asdict(where)
    return store.create(str(template.resolve()), "vertex", target)


def start_local(store: st.Store, template: Path, place: Mapping[str, object]) -> st.Managed:
    """Record a new managed job of `template` whose attempts are local runs made with `place`'s flags
    (`jobs.local_attempts.LocalPlace`'s fields); the template has been loaded already."""
    return store.create(str(template.resolve()), "local", dict(place))


# A controller takes its lock within this long: `controller_running` holds it for an instant to look.
LOCK_WAIT_S = 1.0


def _lock_path(store: st.Store, managed_id: str) -> Path:
    return store.path.parent / f"{managed_id}.lock"


@contextmanager
def _lock(store: st.Store, managed_id: str) -> Iterator[None]:
    with _lock_path(store, managed_id).open("a+") as handle:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise UsageError(
                        f"managed job {managed_id} is being driven by another controller",
                        hint=f"see it: vertexdist managed status {managed_id}",
                    ) from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def controller_running(store: st.Store, managed_id: str) -> bool:
    """Whether a controller (in any process) is driving the managed job now: it holds the job's lock."""
    path = _lock_path(store, managed_id)
    if not path.exists():
        return False
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def controller(
    store: st.Store,
    managed_id: str,
    notice: Callable[[str], None],
    poll_s: float = 5.0,
    backend: AttemptBackend | None = None,
) -> Controller:
    from vertexdist.spec import load_template

    managed = store.get(managed_id)
    template = load_template(Path(managed.template))
    attempts = backend if backend is not None else attempt_backend(managed)
    return Controller(store, managed_id, template, attempts, poll_s=poll_s, notice=notice)


def drive(
    store: st.Store,
    managed_id: str,
    notice: Callable[[str], None],
    poll_s: float = 5.0,
    backend: AttemptBackend | None = None,
) -> st.Managed:
    """Run (or continue) the managed job's controller here until it ends (over `backend`, default the one
    its record names)."""
    with _lock(store, managed_id):
        return controller(store, managed_id, notice, poll_s, backend).run()


# A managed job recorded RUNNING whose controller is gone (killed, or it stopped on an error) reads so.
STOPPED = "STOPPED"


def shown_state(store: st.Store, managed: st.Managed) -> str:
    """The managed job's state as a person should read it: RUNNING only while a controller drives it."""
    if managed.state == st.RUNNING and not controller_running(store, managed.id):
        return STOPPED
    return managed.state


def status(store: st.Store, managed_id: str) -> dict[str, object]:
    """`managed status ID --json`: the store's record, its state read with the controller's liveness."""
    found = store.status(managed_id)
    found["state"] = shown_state(store, store.get(managed_id))
    return found


# How long `--detach` waits for the background controller to create the first attempt's job (or fail to).
DETACH_WAIT_S = 60.0


@dataclass(frozen=True)
class Background:
    """A controller started in the background: its log, and whether the attempt it was left at has its
    job (`started`), or the controller stopped first (`why` says what it wrote last)."""

    log: Path
    started: bool
    why: str = ""


def _attempt_started(store: st.Store, managed_id: str) -> bool:
    attempts = store.attempts(managed_id)
    return bool(attempts) and attempts[-1].phase == st.CREATED


def _last_lines(log: Path, offset: int) -> str:
    try:
        with log.open("rb") as handle:
            handle.seek(offset)
            text = handle.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [line for line in text.splitlines() if line.strip()]
    return "; ".join(lines[-2:])


def drive_in_background(
    store: st.Store, managed_id: str, wait_s: float = DETACH_WAIT_S, poll_s: float = 0.1
) -> Background:
    """Start `vertexdist managed resume ID` in its own session (its output goes to a log beside the store),
    then wait, up to `wait_s`, until its attempt's job is created, or the managed job ends, or the
    controller stops: a controller that cannot start the job is reported here, not left to its log."""
    log = store.path.parent / f"{managed_id}.log"
    out: IO[bytes] = log.open("ab")
    offset = log.stat().st_size
    with out:
        process = subprocess.Popen(
            [sys.executable, "-m", "vertexdist", "managed", "resume", managed_id],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=Path.cwd(),
        )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        exited = process.poll() is not None
        managed = store.get(managed_id)
        if managed.state == st.SUCCEEDED or _attempt_started(store, managed_id):
            return Background(log, True)
        if managed.done or exited:
            why = managed.why if managed.done else _last_lines(log, offset) or "the controller stopped"
            return Background(log, False, why)
        time.sleep(poll_s)
    return Background(log, True)  # still creating it (an image build, a large upload): it goes on there


def cancel_managed(store: st.Store, managed_id: str) -> Cancelled:
    from vertexdist.spec import load_template

    managed = store.get(managed_id)
    return cancel(store, managed_id, attempt_backend(managed), load_template(Path(managed.template)))
