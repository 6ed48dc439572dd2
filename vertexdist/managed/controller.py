"""The managed-job loop: plan an attempt (written first), create its job (or find the one a killed
controller created), watch it, read why it ended, decide the next place, until an attempt succeeds or the
policy stops.

Every status read or lookup that fails with an error worth retrying (5xx, a rate-limit 429, a dropped
connection) is read again with backoff: an attempt ends only when the backend says its job ended.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from vertexdist.backends.base import JobStatus
from vertexdist.backends.errors import message_of
from vertexdist.managed import store as st
from vertexdist.managed.attempts import AttemptBackend, CreatedJob
from vertexdist.managed.policy import Decision, decide
from vertexdist.managed.reasons import Reason, reason_of, reason_of_refusal
from vertexdist.spec.recovery import RecoverySpec, places

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate

T = TypeVar("T")

# The state of an attempt whose job was never created (no credentials, a request the backend refused).
NOT_CREATED = "NOT_CREATED"


@dataclass(frozen=True)
class Backoff:
    first_s: float = 1.0
    max_s: float = 30.0
    give_up_s: float | None = None  # None: keep reading (a job is lost only when the backend says so)


def _noop(_line: str) -> None:
    pass


class Controller:
    """Runs managed job `managed_id` of `store` over `backend` until it ends; `run()` again continues it."""

    def __init__(
        self,
        store: st.Store,
        managed_id: str,
        template: JobTemplate,
        backend: AttemptBackend,
        *,
        poll_s: float = 5.0,
        backoff: Backoff = Backoff(),
        notice: Callable[[str], None] = _noop,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.id = managed_id
        self.places = places(template)
        self.recovery = template.recovery or RecoverySpec()
        self.backend = backend
        self.poll_s = poll_s
        self.backoff = backoff
        self.notice = notice
        self.sleep = sleep

    def _retrying(self, what: str, call: Callable[[], T]) -> T:
        delay, waited = self.backoff.first_s, 0.0
        while True:
            try:
                return call()
            except Exception as exc:  # sorted just below: only transient errors are retried
                if reason_of_refusal(exc) is not Reason.TRANSIENT:
                    raise
                give_up = self.backoff.give_up_s
                if give_up is not None and waited >= give_up:
                    raise
                self.notice(f"managed {self.id}: {what} failed ({exc}); again in {delay:.0f}s")
                self.sleep(delay)
                waited += delay
                delay = min(delay * 2, self.backoff.max_s)

    def _plan(self, place: int) -> st.Attempt:
        t = self.places[place]
        return self.store.plan_attempt(self.id, place, t.location, t.machine_type, t.scheduling_strategy)

    def _resume_folder(self) -> str | None:
        """The folder every attempt after the first continues: the first attempt's output folder."""
        for attempt in self.store.attempts(self.id):
            if attempt.output_dir:
                return attempt.output_dir
        return None

    def _create(self, attempt: st.Attempt) -> CreatedJob | Reason:
        template = self.places[attempt.place]
        found = self._retrying(
            "looking for the attempt's job", lambda: self.backend.find(template, attempt.label)
        )
        if found is not None:
            self.notice(
                f"managed {self.id}: attempt {attempt.number}'s job was already created: {found.name}"
            )
            return found
        try:
            return self.backend.create(template, attempt.label, self._resume_folder())
        except Exception as exc:  # a refusal is an outcome; anything else is re-raised
            reason = reason_of_refusal(exc)
            if reason is None:
                raise
            if reason is Reason.TRANSIENT:
                # The create may have reached the backend: look again before deciding it did not.
                again = self._retrying(
                    "looking for the attempt's job", lambda: self.backend.find(template, attempt.label)
                )
                if again is not None:
                    return again
            self.store.ended(attempt, "REFUSED", reason.value, str(exc))
            return reason

    def _could_not_start(self, attempt: st.Attempt, exc: Exception) -> None:
        """An attempt whose job could not be created for a reason that retrying will not change (no
        credentials, a bad request): the managed job ends FAILED saying why, never a RUNNING ghost."""
        message = message_of(exc)
        self.store.ended(attempt, NOT_CREATED, Reason.USER_ERROR.value, message)
        self.store.finish(
            self.id, st.FAILED, f"attempt {attempt.number}'s job could not be created: {message}"
        )

    def _cancel_job(self, attempt: st.Attempt) -> None:
        """Cancel the attempt's job for a `managed cancel` that recorded none; a job that ended meanwhile
        keeps its real end state."""
        place, job = self.places[attempt.place], attempt.job or ""
        try:
            self._retrying("cancelling", lambda: self.backend.cancel(place, job))
        except Exception:
            status = self._retrying("reading the attempt's job", lambda: self.backend.describe(place, job))
            if not status.done:
                raise
            self.store.ended(attempt, status.state, reason_of(status).value, status.error)
            return
        self.store.ended(attempt, "CANCELLED", Reason.CANCELLED.value, None)

    def _decide(self, attempt: st.Attempt, reason: Reason) -> Decision:
        reasons = [Reason(a.reason) for a in self.store.attempts(self.id) if a.phase == st.ENDED]
        return decide(self.recovery, attempt.place, reason, reasons)

    def step(self) -> bool:
        """One transition; False once the managed job has ended."""
        managed = self.store.get(self.id)
        attempts = self.store.attempts(self.id)
        last = attempts[-1] if attempts else None
        if managed.done:
            if last is not None and last.phase == st.CREATED and last.job and managed.state == st.CANCELLED:
                self._cancel_job(last)
            return False
        if last is None:
            self._plan(0)
            return True
        if last.phase == st.ENDED:
            decision = self._decide(last, Reason(last.reason))
            if decision.place is None:
                state = {Reason.SUCCEEDED: st.SUCCEEDED, Reason.CANCELLED: st.CANCELLED}.get(
                    Reason(last.reason), st.FAILED
                )
                self.store.finish(self.id, state, decision.why)
                self.notice(f"managed {self.id}: {state}: {decision.why}")
                return False
            self.notice(f"managed {self.id}: attempt {last.number} {last.reason}; {decision.why}")
            self._plan(decision.place)
            return True
        if last.phase == st.CREATING:
            try:
                created = self._create(last)
            except Exception as exc:  # recorded, then re-raised for the caller to report
                self._could_not_start(last, exc)
                raise
            if isinstance(created, CreatedJob):
                self.store.created(last, created.name, created.output_dir)
                self.notice(f"managed {self.id}: attempt {last.number}: {created.name}")
            return True
        job = last.job or ""
        status = self._retrying(
            "reading the attempt's job", lambda: self.backend.describe(self.places[last.place], job)
        )
        reason = reason_of(status)
        if reason is Reason.RUNNING:
            if status.state != last.state:
                self.store.job_state(last, status.state)
            self.sleep(self.poll_s)
            return True
        self.store.ended(last, status.state, reason.value, status.error)
        return True

    def run(self) -> st.Managed:
        while self.step():
            pass
        return self.store.get(self.id)


@dataclass(frozen=True)
class Cancelled:
    """What `cancel` did: the managed job as it now reads, and one line saying so."""

    managed: st.Managed
    line: str


def _ended_already(store: st.Store, attempt: st.Attempt, status: JobStatus) -> Cancelled:
    """The attempt's job ended before the cancel reached it: its real end is recorded, and the managed job
    ends as that attempt did (SUCCEEDED), or CANCELLED (no further attempt is made)."""
    reason = reason_of(status)
    store.ended(attempt, status.state, reason.value, status.error)
    state = st.SUCCEEDED if reason is Reason.SUCCEEDED else st.CANCELLED
    why = "an attempt succeeded" if state == st.SUCCEEDED else "cancelled by `vertexdist managed cancel`"
    store.finish(attempt.managed_id, state, why)
    return Cancelled(
        store.get(attempt.managed_id),
        f"managed {attempt.managed_id} {state}: attempt {attempt.number}'s job had already ended"
        f" {status.state} ({reason.value}); nothing to cancel",
    )


def cancel(store: st.Store, managed_id: str, backend: AttemptBackend, template: JobTemplate) -> Cancelled:
    """Mark the managed job cancelled (a running controller stops at its next step) and cancel the running
    attempt's job. A job that ended first (the cancel raced its end) keeps its real end state; an attempt
    whose job was never created is recorded cancelled."""
    managed = store.get(managed_id)
    if managed.done:
        return Cancelled(
            managed, f"managed {managed_id} had already ended {managed.state}; nothing to cancel"
        )
    attempts = store.attempts(managed_id)
    last = attempts[-1] if attempts else None
    if last is not None and last.phase == st.CREATED and last.job:
        place, job = places(template)[last.place], last.job
        status = backend.describe(place, job)
        if status.done:
            return _ended_already(store, last, status)
        store.finish(managed_id, st.CANCELLED, "cancelled by `vertexdist managed cancel`")
        try:
            backend.cancel(place, job)
        except Exception:  # the job may have ended between the read and the cancel: read it again
            status = backend.describe(place, job)
            if not status.done:
                raise
            return _ended_already(store, last, status)
        store.ended(last, "CANCELLED", Reason.CANCELLED.value, None)
        return Cancelled(store.get(managed_id), f"managed {managed_id} CANCELLED")
    store.finish(managed_id, st.CANCELLED, "cancelled by `vertexdist managed cancel`")
    if last is not None and last.phase == st.CREATING:
        store.ended(last, "CANCELLED", Reason.CANCELLED.value, "cancelled before its job was created")
    return Cancelled(store.get(managed_id), f"managed {managed_id} CANCELLED")
