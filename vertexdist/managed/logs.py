"""A managed job's logs across its attempts (`vertexdist managed logs ID`), as SkyPilot's `sky jobs logs`
shows a managed job's logs across recoveries.

Each attempt is one job, read through the same backend code as `vertexdist logs` (`jobs.where.open_job`):
a local run's folder for the attempts of `local-run` with `recovery:`, the Vertex (or emulator) job for
those of `submit --managed`. Each attempt is introduced by one `AttemptHeader`; an attempt that never got a
job (a stockout before its create) is its header alone. Following, the current attempt is followed until
its job ends, then the next one the controller starts, until the managed job has ended. A managed job
whose controller has stopped (killed; `managed resume` continues it) starts no next attempt: following one
stops with `ControllerStopped` once no controller has held its lock for `CONTROLLER_GRACE_S`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vertexdist.backends.base import JobStatus, LogChunk, LogQuery
from vertexdist.errors import UsageError, VertexdistError
from vertexdist.managed import store as st

if TYPE_CHECKING:
    from vertexdist.jobs.where import JobPlace

# The replica shown by default: the chief's, as `sky jobs logs` shows the head node's.
CHIEF = "workerpool0-0"
# How long a follow waits for a controller to (re)appear: `submit --managed` prints the id before it locks.
CONTROLLER_GRACE_S = 5.0


class ControllerStopped(VertexdistError):
    """Following a managed job that is not ended, but that no controller drives: nothing will end it."""


class _Controller:
    """Whether the managed job's controller has been gone (its lock free) for `grace_s` in a row."""

    def __init__(self, store: st.Store, managed_id: str, grace_s: float) -> None:
        self.store, self.managed_id, self.grace_s = store, managed_id, grace_s
        self._absent_since: float | None = None

    def gone(self) -> bool:
        from vertexdist.managed.service import controller_running

        if controller_running(self.store, self.managed_id):
            self._absent_since = None
            return False
        now = time.monotonic()
        if self._absent_since is None:
            self._absent_since = now
        return now - self._absent_since >= self.grace_s

    def stopped(self, what: str) -> ControllerStopped:
        return ControllerStopped(
            f"managed job {self.managed_id} has not ended, but no controller drives it: {what}",
            hint=f"continue it: vertexdist managed resume {self.managed_id} (then follow it again)",
        )


@dataclass(frozen=True)
class AttemptHeader:
    """The line before an attempt's logs: its number, its job (None: it never got one) and its reason."""

    managed_id: str
    number: int
    job: str | None
    reason: str
    error: str | None = None

    @property
    def line(self) -> str:
        head = f"== attempt {self.number} of {self.managed_id}: "
        if self.job is not None:
            return head + f"{self.job} {self.reason}"
        if self.reason == st.RUNNING:
            return head + "no job yet (being created)"
        why = f": {self.error}" if self.error else ""
        return head + f"no job ({self.reason}{why})"

    def to_dict(self) -> dict[str, object]:
        """The header as `--json` prints it, beside the log lines' records."""
        return {"managed": self.managed_id, "attempt": self.number, "job": self.job, "reason": self.reason}


@dataclass(frozen=True)
class AttemptLog:
    """One log chunk of an attempt's job, with the job's status when it was read (for masking secrets)."""

    number: int
    chunk: LogChunk
    status: JobStatus


@dataclass(frozen=True)
class AttemptEnd:
    """The attempt's job as last read, after its logs (None: it had no job)."""

    number: int
    status: JobStatus | None


Item = AttemptHeader | AttemptLog | AttemptEnd


def check_attempt(store: st.Store, managed_id: str, attempt: int | None) -> list[st.Attempt]:
    """The managed job's attempts; UsageError when it is unknown or `attempt` is out of their range."""
    store.get(managed_id)  # UnknownManagedJob, with how to list them
    attempts = store.attempts(managed_id)
    if attempt is None:
        return attempts
    if not attempts:
        raise UsageError(
            f"managed job {managed_id} has no attempt yet",
            hint=f"see it: vertexdist managed status {managed_id}",
        )
    if not 1 <= attempt <= len(attempts):
        raise UsageError(
            f"--attempt {attempt} is out of range: managed job {managed_id} has attempts"
            f" 1 to {len(attempts)}",
            hint=f"see them: vertexdist managed status {managed_id}",
        )
    return attempts


def _job_ref(managed: st.Managed, attempt: st.Attempt) -> str:
    """What `open_job` takes for the attempt's job: a local attempt's run folder (its runs folder may not
    be the default one), else the job's name."""
    assert attempt.job is not None
    if managed.backend == "local" and attempt.output_dir and Path(attempt.output_dir).is_dir():
        return attempt.output_dir
    return attempt.job


def _place(managed: st.Managed, attempt: st.Attempt) -> JobPlace:
    from vertexdist.jobs.where import JobPlace

    target = managed.target
    return JobPlace(
        project=target.get("project"),
        location=attempt.location or target.get("location"),
        endpoint=target.get("endpoint"),
        transport=target.get("transport"),
    )


def _attempt_logs(
    store: st.Store,
    managed: st.Managed,
    attempt: st.Attempt,
    query: LogQuery,
    *,
    follow: bool,
    controller: _Controller,
    sleep: Callable[[float], None],
) -> Iterator[Item]:
    from vertexdist.backends.watch import log_policy, polls
    from vertexdist.jobs.where import open_job

    def over(status: JobStatus) -> bool:
        if not follow or status.done:
            return True
        if store.attempts(managed.id)[attempt.number - 1].phase == st.ENDED:
            return True
        if managed.backend == "local" and controller.gone():  # a local attempt runs inside its controller
            raise controller.stopped(f"its attempt {attempt.number} was lost with it")
        return False

    with open_job(_job_ref(managed, attempt), _place(managed, attempt)) as (backend, name):
        events = polls(
            backend, name, logs=True, log_query=query, policy=log_policy(backend), until=over, sleep=sleep
        )
        for status, chunk in events:
            if chunk is not None:
                yield AttemptLog(attempt.number, chunk, status)
    yield AttemptEnd(attempt.number, status)  # the last status read: `polls` yields each one


def managed_logs(
    store: st.Store,
    managed_id: str,
    *,
    attempt: int | None = None,
    replica: str | None = None,
    follow: bool = False,
    poll_s: float = 1.0,
    controller_grace_s: float = CONTROLLER_GRACE_S,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Item]:
    """Each attempt's header, then its job's log lines (`replica`'s, default the chief's), in order: every
    attempt, or only `attempt` (from 1). Following: the current attempt until its job ends, then each next
    one the controller starts, until the managed job has ended (with `attempt`: until that one's job has);
    `ControllerStopped` when no controller drives it any more.
    """
    check_attempt(store, managed_id, attempt)
    query = LogQuery(replica=replica or CHIEF)
    number = attempt or 1
    controller = _Controller(store, managed_id, controller_grace_s)
    while True:
        managed = store.get(managed_id)  # before the attempts: an ended job has all its attempts written
        attempts = store.attempts(managed_id)
        found = attempts[number - 1] if number <= len(attempts) else None
        if follow and not managed.done and (found is None or (found.job is None and found.phase != st.ENDED)):
            # Waiting for the next attempt, or for the job of one being created.
            if controller.gone() and not store.get(managed_id).done:
                raise controller.stopped(f"no attempt {number} will start")
            sleep(poll_s)
            continue
        if found is None:
            return
        yield AttemptHeader(managed_id, number, found.job, found.reason, found.error)
        if found.job is None:
            yield AttemptEnd(number, None)
        else:
            yield from _attempt_logs(
                store, managed, found, query, follow=follow, controller=controller, sleep=sleep
            )
        if attempt is not None:
            return
        number += 1
