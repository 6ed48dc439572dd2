"""A fault plan applied to local runs (`vertexdist local-run --fault-plan FILE`): the emulator's faults, with
the emulator's own bookkeeping (`emulator.capacity.CapacityFaults`: which fault hits which job, `times`
counted down) and its own signals (`emulator.preemption.Preemptions`), so a local run is refused or fails
with exactly the shapes the emulator gives (`wire.capacity_errors`, docs/reference/vertex.md §8) and a
managed controller reads both the same way:

- quota: the run is refused before anything starts: `ApiCallError`, HTTP 429, Vertex's quota message;
- stockout: the job ends FAILED with "Resources are insufficient in region: R" before any replica starts;
- flex_wait (a FLEX_START template): the run waits `wait` before its replicas start, or fails with the
  max_wait_duration error once that has passed;
- preempt (outcome job_fails): `after` the replica started (or once its local rank 0 made `after_step`
  steps: its watcher marks the step and waits there), SIGTERM to its process group, SIGKILL after `grace`;
  the job then fails with the preemption error, whatever the replicas' exits said;
- preempt with `outcome: worker_restarts`, and maintenance: the same signals, but the job is told first
  that the platform stops the replica (`LocalJob.stopped_by_platform`), so the runner restarts it and the
  job goes on (docs/reference/vertex.md §8.1);
- hang, slow: handed to the ranks' health watchers (`LocalJob.rank_faults`), which block or slow that rank
  from its step hook;
- scattered_start: each replica's first start is delayed (`LocalJob.start_delays`).
A plan's `times` counts the jobs of one process: one `local-run` is one job.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vertexdist.backends.base import JobError, ReplicaState
from vertexdist.backends.errors import ApiCallError
from vertexdist.emulator.capacity import (
    CapacityFaults,
    accelerator_type,
    flex_wait_outcome,
    max_wait_s,
    not_emulated,
)
from vertexdist.emulator.preemption import Preemptions
from vertexdist.errors import UsageError
from vertexdist.wire import capacity_errors

if TYPE_CHECKING:
    from vertexdist.local.runner import LocalJob
    from vertexdist.spec.fault_plan import FaultPlan

TICK_S = 0.1


def _error(shape: dict[str, object], replica: str | None = None) -> JobError:
    return JobError(int(str(shape["code"])), str(shape["message"]), replica=replica)


@dataclass
class LocalFaults:
    """One fault plan for the local runs this process starts; `sleep` is the Flex-start wait's."""

    plan: FaultPlan
    sleep: Callable[[float], None] = time.sleep
    notice: Callable[[str], None] = lambda _line: None
    capacity: CapacityFaults = field(init=False)

    def __post_init__(self) -> None:
        refused = not_emulated(self.plan)
        if refused is not None:
            raise UsageError(refused, hint="local-run applies the faults the emulator does")
        self.capacity = CapacityFaults(self.plan)

    def before_create(self, location: str, spec: dict[str, Any], what: str) -> JobError | None:
        """Before the job is made: a quota refusal is raised (as the create call is refused); a Flex-start
        wait is waited here; the failure a stockout or an expired wait gives the job, if one does."""
        if self.capacity.refuse_create(location, spec, what):
            raise ApiCallError(
                capacity_errors.quota_message(accelerator_type(spec), location),
                "a fault plan's quota fault (--fault-plan); on Vertex: request more quota or try a"
                " recovery: fallback",
                capacity_errors.HTTP_TOO_MANY_REQUESTS,
            )
        if self.capacity.stockout(what, location, spec):
            return _error(capacity_errors.stockout_error(location))
        flex = self.capacity.flex_wait(what, spec)
        if flex is None:
            return None
        wait, expires = flex_wait_outcome(flex, spec)
        self.notice(f"flex-start: waiting {wait:g}s for capacity (fault plan)")
        self.sleep(wait)
        return _error(capacity_errors.flex_expired_error(max_wait_s(spec))) if expires else None

    def arm(self, job: LocalJob, name: str, spec: dict[str, Any], failure: JobError | None) -> None:
        """Apply what the plan holds for the started `job`: the failure `before_create` gave (no replica
        starts), or its preemptions, carried out by a thread of their own until the job is done."""
        if failure is not None:
            job.impose_failure(failure, stop=True)
            return
        rank_faults = self.capacity.rank_faults(name, spec)  # the watchers act on them (hang, slow)
        job.start_delays = self.capacity.start_delays(name, spec)  # scattered_start
        armed = self.capacity.replica_faults(name, spec)
        # A step-aimed preemption's step is marked by the replica's local rank 0's watcher (after_step).
        job.rank_faults = rank_faults + [aim for aim in (a.aim() for a in armed) if aim is not None]
        if armed:
            preemptions = Preemptions(armed, stop_notice=job.stopped_by_platform, reached=job.reached_step)
            threading.Thread(
                target=_preempt, args=(job, preemptions), name="local-preempt", daemon=True
            ).start()


def _running_pids(job: LocalJob) -> dict[str, int]:
    return {r.name: r.pid for r in job.replicas() if r.pid is not None and r.state is ReplicaState.RUNNING}


def _preempt(job: LocalJob, preemptions: Preemptions) -> None:
    """SIGTERM and SIGKILL as due; for a job_fails preemption the job fails with the preemption error from
    the SIGTERM on (a replica that checkpoints and exits 0 in the grace does not make it a success), and is
    stopped once the replica is reclaimed; a restarting fault's replica is restarted by the runner."""
    while not job.done:
        reclaimed = preemptions.tick(_running_pids(job))
        if preemptions.preempted is not None:
            job.impose_failure(
                _error(capacity_errors.preemption_error(preemptions.preempted), preemptions.preempted),
                stop=reclaimed,
            )
            if reclaimed:
                return
        time.sleep(TICK_S)
