"""Capacity faults the emulator injects from a fault plan (`emulator start --fault-plan FILE`).

Each fault of the plan (`vertexdist.spec.fault_plan`) hits the first `times` jobs it matches:

- quota: the create call is refused (HTTP 429 RESOURCE_EXHAUSTED, the quota metric of the job's GPUs);
- stockout: the job goes PENDING, then FAILED with Vertex's "Resources are insufficient in region" error;
- flex_wait: a FLEX_START job stays PENDING for `wait`, or fails when that is past its max_wait_duration;
  neither stockout nor flex_wait touches a job on an existing persistent resource (`reserved`: its
  machines are held for it already), and such a job does not use up the fault's `times`;
- preempt: `after` the replica started, SIGTERM to its process group, SIGKILL after `grace`; with
  outcome job_fails the job then fails with a preemption error, with worker_restarts the replica is started
  again (same hostname) and the job goes on;
- maintenance: as a preemption with worker_restarts (Vertex moves the worker to another VM), with the
  fault's `grace` (GCE's 30 s unless given).

The error shapes are `vertexdist.wire.capacity_errors`' (docs/reference/vertex.md §8).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from vertexdist.spec.durations import parse_duration
from vertexdist.spec.fault_plan import (
    FaultPlan,
    FlexWaitFault,
    HangFault,
    MaintenanceFault,
    PreemptFault,
    QuotaFault,
    ScatteredStartFault,
    SlowFault,
    StockoutFault,
)

# scheduling.max_wait_duration when a FLEX_START job names none (docs/reference/vertex.md §8.5).
DEFAULT_MAX_WAIT_S = 24 * 3600.0


def _pools(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in spec.get("workerPoolSpecs") or [] if p]


def machine_type(spec: dict[str, Any]) -> str:
    pools = _pools(spec)
    return str(pools[0].get("machineSpec", {}).get("machineType", "")) if pools else ""


def accelerator_type(spec: dict[str, Any]) -> str | None:
    pools = _pools(spec)
    value = pools[0].get("machineSpec", {}).get("acceleratorType") if pools else None
    return str(value) if value else None


def replica_names(spec: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for index, pool in enumerate(spec.get("workerPoolSpecs") or []):
        if pool:
            names.update(f"workerpool{index}-{i}" for i in range(int(pool.get("replicaCount", 1) or 1)))
    return names


def strategy(spec: dict[str, Any]) -> str:
    return str((spec.get("scheduling") or {}).get("strategy") or "STANDARD")


def max_wait_s(spec: dict[str, Any]) -> float:
    """The job's scheduling.max_wait_duration in seconds; 0 waits forever."""
    value = (spec.get("scheduling") or {}).get("maxWaitDuration")
    if value is None:
        return DEFAULT_MAX_WAIT_S
    text = str(value)
    return 0.0 if text in ("0", "0s") else parse_duration(text)


def flex_wait_outcome(flex: FlexWaitFault, spec: dict[str, Any]) -> tuple[float, bool]:
    """How long a FLEX_START job waits for capacity, and whether it expires (past max_wait_duration)."""
    limit = max_wait_s(spec)
    expires = flex.wait is None or (limit > 0 and flex.wait > limit)
    wait = (limit if limit > 0 else float("inf")) if expires else float(flex.wait or 0.0)
    return wait, expires


@dataclass
class ReplicaFault:
    """One preemption or maintenance armed against one replica of one job."""

    replica: str
    after_s: float
    grace_s: float
    restarts: bool  # the replica is started again (worker_restarts, maintenance); else the job fails
    kind: str
    after_step: int | None = None  # due once the replica's local rank 0 reached this step, not `after_s`

    def aim(self) -> dict[str, object] | None:
        """For a step-aimed fault: what the replica's local rank 0's health watcher reads
        (`vertexdist_launcher.health`: at that step it marks it and waits for the signal)."""
        if self.after_step is None:
            return None
        return {"kind": self.kind, "replica": self.replica, "local_rank": 0, "after_step": self.after_step}


@dataclass
class CapacityFaults:
    """The fault plan with what is left of each fault's `times`; thread-safe."""

    plan: FaultPlan = field(default_factory=lambda: FaultPlan(()))
    _left: list[int] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    fired: list[tuple[str, str]] = field(default_factory=list)  # (kind, job name), in order

    def __post_init__(self) -> None:
        self._left = [f.times for f in self.plan.faults]

    def _take(self, index: int, job: str) -> None:
        self._left[index] -= 1
        self.fired.append((self.plan.faults[index].kind, job))

    def refuse_create(self, location: str, spec: dict[str, Any], what: str) -> bool:
        """Whether this create is refused for quota (and count it)."""
        with self._lock:
            for index, fault in enumerate(self.plan.faults):
                if (
                    isinstance(fault, QuotaFault)
                    and self._left[index] > 0
                    and fault.location in (None, location)
                ):
                    self._take(index, what)
                    return True
        return False

    def stockout(self, job: str, location: str, spec: dict[str, Any], *, reserved: bool = False) -> bool:
        """Whether this job meets a stockout (and count it); never one on reserved capacity."""
        if reserved:
            return False
        with self._lock:
            for index, fault in enumerate(self.plan.faults):
                if (
                    isinstance(fault, StockoutFault)
                    and self._left[index] > 0
                    and fault.location in (None, location)
                    and fault.machine_type in (None, machine_type(spec))
                ):
                    self._take(index, job)
                    return True
        return False

    def flex_wait(self, job: str, spec: dict[str, Any], *, reserved: bool = False) -> FlexWaitFault | None:
        """The Flex-start wait this job meets (and count it); none on reserved capacity."""
        if reserved or strategy(spec) != "FLEX_START":
            return None
        with self._lock:
            for index, fault in enumerate(self.plan.faults):
                if isinstance(fault, FlexWaitFault) and self._left[index] > 0:
                    self._take(index, job)
                    return fault
        return None

    def replica_faults(self, job: str, spec: dict[str, Any]) -> list[ReplicaFault]:
        """The preemptions and maintenance events this job will meet, one per matching fault."""
        names = replica_names(spec)
        armed: list[ReplicaFault] = []
        with self._lock:
            for index, fault in enumerate(self.plan.faults):
                if not isinstance(fault, PreemptFault | MaintenanceFault) or self._left[index] <= 0:
                    continue
                if fault.replica not in names:
                    continue
                self._take(index, job)
                if isinstance(fault, PreemptFault):
                    armed.append(
                        ReplicaFault(
                            fault.replica,
                            fault.after,
                            fault.grace,
                            fault.outcome == "worker_restarts",
                            "preempt",
                            fault.after_step,
                        )
                    )
                else:
                    armed.append(
                        ReplicaFault(
                            fault.replica, fault.after, fault.grace, True, "maintenance", fault.after_step
                        )
                    )
        return armed

    def start_delays(self, job: str, spec: dict[str, Any]) -> dict[str, float]:
        """How late each replica of this job starts: the first `scattered_start` fault left (seeded)."""
        with self._lock:
            for index, fault in enumerate(self.plan.faults):
                if isinstance(fault, ScatteredStartFault) and self._left[index] > 0:
                    self._take(index, job)
                    return fault.delays(replica_names(spec))
        return {}

    def rank_faults(self, job: str, spec: dict[str, Any]) -> list[dict[str, object]]:
        """The `hang` and `slow` faults this job's ranks meet, as their watchers read them (one per fault)."""
        names = replica_names(spec)
        found: list[dict[str, object]] = []
        with self._lock:
            for index, fault in enumerate(self.plan.faults):
                if (
                    isinstance(fault, HangFault | SlowFault)
                    and self._left[index] > 0
                    and fault.replica in names
                ):
                    self._take(index, job)
                    found.append(fault.to_worker())
        return found


def not_emulated(plan: FaultPlan) -> str | None:
    """Why this plan cannot run on the emulator yet, naming the first such entry; None if it can.

    Every kind is carried out now: maintenance and `outcome: worker_restarts` too, since the runner restarts
    one replica inside a job (`vertexdist.local.runner`, docs/reference/vertex.md §8.1)."""
    del plan
    return None
