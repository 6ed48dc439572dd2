"""After an attempt ends: where the next one goes, or why there is none. Pure.

Places are numbered as `spec.recovery.places` lists them: 0 is the template, 1.. its fallbacks in order.
- PREEMPTED, TRANSIENT: the same place (the capacity was there a moment ago), within `max_preemptions`.
- STOCKOUT, QUOTA: the next place; after the last fallback, the template again (capacity comes back),
  within `max_preemptions`.
- USER_ERROR: the same place, within `max_restarts_on_errors`.
- HUNG: the same place, from its checkpoints as after a preemption, within `max_hangs`.
- SUCCEEDED, CANCELLED: stop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vertexdist.managed.reasons import Reason
from vertexdist.spec.recovery import RecoverySpec


@dataclass(frozen=True)
class Decision:
    place: int | None  # the next attempt's place; None: stop
    why: str


def decide(recovery: RecoverySpec, place: int, reason: Reason, reasons_so_far: Sequence[Reason]) -> Decision:
    """The next step after an attempt in `place` ended with `reason`; `reasons_so_far` are every ended
    attempt's reasons, this one included."""
    if reason is Reason.SUCCEEDED:
        return Decision(None, "an attempt succeeded")
    if reason is Reason.CANCELLED:
        return Decision(None, "cancelled")
    if reason is Reason.RUNNING:
        raise ValueError("decide() is for ended attempts")
    places = 1 + len(recovery.fallback)
    if reason is Reason.USER_ERROR:
        used = sum(1 for r in reasons_so_far if r is Reason.USER_ERROR)
        if used > recovery.max_restarts_on_errors:
            return Decision(
                None,
                f"the job's own code failed ({used} time(s); recovery.max_restarts_on_errors is "
                f"{recovery.max_restarts_on_errors})",
            )
        return Decision(
            place, f"restart {used} of {recovery.max_restarts_on_errors} after the job's own error"
        )
    if reason is Reason.HUNG:
        used = sum(1 for r in reasons_so_far if r is Reason.HUNG)
        if used > recovery.max_hangs:
            return Decision(None, f"hung {used} time(s); recovery.max_hangs is {recovery.max_hangs}")
        return Decision(place, f"hung: again in the same place ({used} of {recovery.max_hangs})")
    used = sum(1 for r in reasons_so_far if r.capacity)
    if used > recovery.max_preemptions:
        return Decision(
            None,
            f"{reason.value.lower()}: {used} attempt(s) lost to capacity; recovery.max_preemptions is "
            f"{recovery.max_preemptions}",
        )
    if reason in (Reason.PREEMPTED, Reason.TRANSIENT):
        return Decision(
            place, f"{reason.value.lower()}: again in the same place ({used} of {recovery.max_preemptions})"
        )
    following = (place + 1) % places
    return Decision(
        following, f"{reason.value.lower()}: next place {following} ({used} of {recovery.max_preemptions})"
    )
