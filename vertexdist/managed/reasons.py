"""Why an attempt ended, read from what Vertex reports (docs/reference/vertex.md §8.6).

Pure: reads a `JobStatus` or an API error; no google import.
"""

from __future__ import annotations

from enum import Enum

from vertexdist.backends.base import JobStatus
from vertexdist.backends.errors import is_quota, is_transient, message_of, status_of


class Reason(str, Enum):
    PREEMPTED = "PREEMPTED"
    STOCKOUT = "STOCKOUT"
    QUOTA = "QUOTA"
    USER_ERROR = "USER_ERROR"
    HUNG = "HUNG"  # no rank made progress for health.hang_timeout (docs/guide/rank-health.md)
    TRANSIENT = "TRANSIENT"
    CANCELLED = "CANCELLED"
    SUCCEEDED = "SUCCEEDED"
    RUNNING = "RUNNING"  # not an outcome: the attempt has not ended

    @property
    def capacity(self) -> bool:
        """The cloud took capacity away or refused it: counted against `max_preemptions`."""
        return self in (Reason.PREEMPTED, Reason.STOCKOUT, Reason.QUOTA, Reason.TRANSIENT)


STOCKOUT_WORDS = ("resources are insufficient", "stockout", "max_wait_duration", "no capacity")
PREEMPTED_WORDS = ("preempt", "spot vm", "reclaimed")
# A local or emulator job's error is the health monitor's verdict; on Vertex, a replica that exited with the
# watcher's code (vertexdist_launcher.health.HUNG_EXIT, 124).
HUNG_PREFIX = "hung: "
HUNG_EXIT_WORDS = "non-zero status of 124"
# A local attempt whose supervisor (the controller's own process) died with it: the host was lost, not the
# job's code; the next attempt continues from its checkpoints (vertexdist/jobs/local_attempts.py).
LOST_MESSAGE = "the local job was lost with the process that ran it (the controller was stopped)"


def reason_of(status: JobStatus) -> Reason:
    """The reason of an attempt whose job reads `status`; RUNNING while it has not ended."""
    if not status.done:
        return Reason.RUNNING
    if status.state == "SUCCEEDED":
        return Reason.SUCCEEDED
    if status.state == "CANCELLED":
        return Reason.CANCELLED
    if status.state == "EXPIRED":  # a Flex-start wait ran out, should Vertex say so this way (§8.5)
        return Reason.STOCKOUT
    message = (status.error or "").lower()
    if LOST_MESSAGE in message:
        return Reason.TRANSIENT
    if message.startswith(HUNG_PREFIX) or HUNG_EXIT_WORDS in message:
        return Reason.HUNG
    if any(word in message for word in PREEMPTED_WORDS):
        return Reason.PREEMPTED
    if any(word in message for word in STOCKOUT_WORDS):
        return Reason.STOCKOUT
    if is_quota(message) and "exceed" in message:
        return Reason.QUOTA
    return Reason.USER_ERROR


def reason_of_refusal(exc: BaseException) -> Reason | None:
    """The reason of a create that failed with `exc`: QUOTA for 429 RESOURCE_EXHAUSTED naming a quota,
    STOCKOUT for a refusal naming missing capacity, TRANSIENT for an error worth retrying; None for any
    other error (a bad request stays bad: the controller stops and says why)."""
    message = message_of(exc)
    code = status_of(exc)
    if code is None and isinstance(getattr(exc, "status", None), int):  # backends.errors.ApiCallError
        code = exc.status  # type: ignore[attr-defined]
    if code == 429 and is_quota(message):
        return Reason.QUOTA
    if code in (429, 503) and any(word in message.lower() for word in STOCKOUT_WORDS):
        return Reason.STOCKOUT
    if is_transient(exc) or code in (429, 500, 502, 503, 504):
        return Reason.TRANSIENT
    return None
