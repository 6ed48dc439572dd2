"""Carries out the preemptions armed against one running job: SIGTERM to the replica's process group
`after` it started, SIGKILL once `grace` has passed, as Compute Engine reclaims a Spot VM
(docs/reference/vertex.md §8.2).

`tick` is called by the emulator's supervisor on each poll; it reads the replicas' pids from the running
job (`replica_pids`, replica name -> pid of its process group's leader).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from vertexdist.emulator.capacity import ReplicaFault


@dataclass
class _Armed:
    fault: ReplicaFault
    seen_at: float | None = None  # when the replica was first seen running
    pid: int | None = None
    term_at: float | None = None
    killed: bool = False


class Preemptions:
    """The preemptions of one job; `preempted` names the first replica signalled (the job's failure)."""

    def __init__(self, faults: list[ReplicaFault], clock: Callable[[], float] = time.monotonic) -> None:
        self._armed = [_Armed(f) for f in faults]
        self._clock = clock
        self.preempted: str | None = None  # set when its SIGTERM is sent
        self.stopping = False  # the job is being stopped after the reclaim

    def tick(self, replica_pids: dict[str, int]) -> bool:
        """Signal what is due; True once a replica has been reclaimed (SIGKILL sent or it is gone)."""
        now = self._clock()
        done = False
        for armed in self._armed:
            if armed.killed:
                done = True
                continue
            pid = replica_pids.get(armed.fault.replica)
            if armed.term_at is None:
                if pid is None:
                    continue
                if armed.seen_at is None:
                    armed.seen_at = now
                if now - armed.seen_at >= armed.fault.after_s:
                    armed.pid = pid
                    armed.term_at = now
                    _signal(pid, signal.SIGTERM)
                    self.preempted = self.preempted or armed.fault.replica
                continue
            gone = armed.pid is not None and replica_pids.get(armed.fault.replica) != armed.pid
            if gone or now - armed.term_at >= armed.fault.grace_s:
                if not gone and armed.pid is not None:
                    _signal(armed.pid, signal.SIGKILL)
                armed.killed = True
                done = True
        return done


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, sig)
