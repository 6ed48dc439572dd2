"""Carries out the preemptions and maintenance events armed against one running job: SIGTERM to the
replica's process group `after` it started (or, for a fault with `after_step`, once `reached` says its local
rank 0 made that step: its health watcher marks it and waits), SIGKILL once `grace` has passed, as Compute
Engine stops a VM (docs/reference/vertex.md §8.2).

A fault that restarts the replica (maintenance, a preemption with `outcome: worker_restarts`) first tells
the job that the platform is stopping it (`stop_notice`: `LocalJob.stopped_by_platform`), so the runner
restarts it rather than failing the job (§8.1); it never makes `preempted` or `tick`'s True, which are the
job's failure.

`tick` is called by the emulator's supervisor on each poll (and by local-run's fault thread); it reads the
replicas' pids from the running job (`replica_pids`, replica name -> pid of its process group's leader).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from vertexdist.emulator.capacity import ReplicaFault

# Told before a restarting fault's SIGTERM: (replica, its group leader's pid, why: "was stopped by ...").
StopNotice = Callable[[str, int, str], object]

WHY = {
    "maintenance": "was stopped by a maintenance event (fault plan)",
    "preempt": "was preempted: Compute Engine reclaimed its Spot VM (fault plan, outcome worker_restarts)",
}


@dataclass
class _Armed:
    fault: ReplicaFault
    seen_at: float | None = None  # when the replica was first seen running
    pid: int | None = None
    term_at: float | None = None
    killed: bool = False


class Preemptions:
    """The preemptions of one job; `preempted` names the first replica signalled (the job's failure)."""

    def __init__(
        self,
        faults: list[ReplicaFault],
        clock: Callable[[], float] = time.monotonic,
        stop_notice: StopNotice | None = None,
        reached: Callable[[str], bool] | None = None,
    ) -> None:
        self._armed = [_Armed(f) for f in faults]
        self._clock = clock
        self._stop_notice = stop_notice
        # Whether a replica reached the step a step-aimed fault (`after_step`) waits for; without it such a
        # fault never comes due.
        self._reached = reached
        self.preempted: str | None = None  # a job_fails fault's replica, set when its SIGTERM is sent
        self.restarted: list[str] = []  # the replicas a restarting fault stopped, in order
        self.stopping = False  # the job is being stopped after the reclaim

    def tick(self, replica_pids: dict[str, int]) -> bool:
        """Signal what is due; True once a job_fails fault's replica has been reclaimed (SIGKILL sent or it
        is gone): the job is to be stopped then. A restarting fault's replica is left to the runner."""
        now = self._clock()
        done = False
        for armed in self._armed:
            if armed.killed:
                done = done or not armed.fault.restarts
                continue
            pid = replica_pids.get(armed.fault.replica)
            if armed.term_at is None:
                if pid is None:
                    continue
                if armed.seen_at is None:
                    armed.seen_at = now
                if self._due(armed, now):
                    armed.pid = pid
                    armed.term_at = now
                    if armed.fault.restarts:
                        why = WHY.get(armed.fault.kind, WHY["preempt"])
                        if self._stop_notice is not None:
                            self._stop_notice(armed.fault.replica, pid, why)
                        self.restarted.append(armed.fault.replica)
                    else:
                        self.preempted = self.preempted or armed.fault.replica
                    _signal(pid, signal.SIGTERM)
                continue
            gone = armed.pid is not None and replica_pids.get(armed.fault.replica) != armed.pid
            if gone or now - armed.term_at >= armed.fault.grace_s:
                if not gone and armed.pid is not None:
                    _signal(armed.pid, signal.SIGKILL)
                armed.killed = True
                done = done or not armed.fault.restarts
        return done

    def _due(self, armed: _Armed, now: float) -> bool:
        if armed.fault.after_step is not None:
            return self._reached is not None and self._reached(armed.fault.replica)
        return armed.seen_at is not None and now - armed.seen_at >= armed.fault.after_s


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, sig)
