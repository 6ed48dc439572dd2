"""A managed job's logs across its attempts (`vertexdist managed logs ID`), as SkyPilot's `sky jobs logs`
shows a managed job's logs across recoveries.

Each attempt is one job, read through the same backend code as `vertexdist logs` (`jobs.where.open_job`):
a local run's folder for the attempts of `local-run` with `recovery:`, the Vertex (or emulator) job for
those of `submit --managed`. Each attempt is introduced by one `AttemptHeader`; an attempt that never got a
job (a stockout before its create) is its header alone. Following, the current attempt is followed until
its job ends, then the next one the controller starts, until the managed job has ended.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vertexdist.backends.base import JobStatus, LogChunk, LogQuery
from vertexdist.errors import UsageError
from vertexdist.managed import store as st

if TYPE_CHECKING:
    from vertexdist.jobs.where import JobPlace

# The replica shown by default: the chief's, as `sky jobs logs` shows the head node's.
CHIEF = "workerpool0-0"


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
    sleep: Callable[[float], None],
) -> Iterator[Item]:
    from vertexdist.backends.watch import log_policy, stream_logs
    from vertexdist.jobs.where import open_job

    def over(status: JobStatus) -> bool:
        if not follow or status.done:
            return True
        # A job that will not end on its own (a local attempt lost with its controller) ends in the record.
        return store.attempts(managed.id)[attempt.number - 1].phase == st.ENDED

    with open_job(_job_ref(managed, attempt), _place(managed, attempt)) as (backend, name):
        lines = stream_logs(
            backend, name, log_query=query, policy=log_policy(backend), until=over, sleep=sleep
        )
        while True:
            try:
                chunk, status = next(lines)
            except StopIteration as stopped:
                final: JobStatus = stopped.value
                break
            yield AttemptLog(attempt.number, chunk, status)
    yield AttemptEnd(attempt.number, final)


def managed_logs(
    store: st.Store,
    managed_id: str,
    *,
    attempt: int | None = None,
    replica: str | None = None,
    follow: bool = False,
    poll_s: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Item]:
    """Each attempt's header, then its job's log lines (`replica`'s, default the chief's), in order: every
    attempt, or only `attempt` (from 1). Following: the current attempt until its job ends, then each next
    one the controller starts, until the managed job has ended (with `attempt`: until that one's job has).
    """
    check_attempt(store, managed_id, attempt)
    query = LogQuery(replica=replica or CHIEF)
    number = attempt or 1
    while True:
        managed = store.get(managed_id)  # before the attempts: an ended job has all its attempts written
        attempts = store.attempts(managed_id)
        if number > len(attempts):
            if not follow or managed.done:
                return
            sleep(poll_s)
            continue
        found = attempts[number - 1]
        if found.job is None and found.phase != st.ENDED and follow:
            sleep(poll_s)  # being created: wait for its job
            continue
        yield AttemptHeader(managed_id, number, found.job, found.reason, found.error)
        if found.job is None:
            yield AttemptEnd(number, None)
        else:
            yield from _attempt_logs(store, managed, found, query, follow=follow, sleep=sleep)
        if attempt is not None:
            return
        number += 1
