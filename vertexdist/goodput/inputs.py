"""What the ledger is computed from: plain values, the same for a local run, an emulator job and a Vertex
job (`vertexdist.goodput.gather` reads them). Times are seconds since the epoch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# An attempt that ended this way lost the steps it made after its last checkpoint (the next attempt, or a
# rerun, starts from that checkpoint). SUCCEEDED, RUNNING and CANCELLED lose nothing: the work is kept or was
# stopped on purpose.
LOSING_REASONS = frozenset({"PREEMPTED", "HUNG", "TRANSIENT", "USER_ERROR", "STOCKOUT", "QUOTA", "FAILED"})
# The ends that count as a failure the checkpoint interval should cover (the platform's, not the code's).
INTERRUPTIONS = frozenset({"PREEMPTED", "HUNG", "TRANSIENT"})


@dataclass(frozen=True)
class RankRecord:
    """One rank's last heartbeat (`vertexdist_launcher.health`), as much of it as the ledger reads. `steps`
    and `checkpoint_step` count the steps this process made (a resumed attempt counts from 0 again)."""

    rank: int
    replica: str
    steps: int = 0
    first_step_at: float | None = None
    last_step_at: float | None = None
    step_s: float | None = None
    own_step_s: float | None = None
    checkpoint_s: float = 0.0  # time spent saving, in all
    checkpoints: int = 0  # saves made
    checkpoint_step: int | None = None  # the step count at the last save

    @classmethod
    def from_beat(cls, beat: Mapping[str, Any]) -> RankRecord:
        """From a heartbeat dict; a field of the wrong type reads as missing (heartbeats are untrusted)."""

        def number(key: str) -> float | None:
            value = beat.get(key)
            return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

        def whole(key: str) -> int | None:
            value = number(key)
            return int(value) if value is not None else None

        return cls(
            rank=int(beat["rank"]),
            replica=str(beat.get("replica") or "workerpool0-0"),
            steps=max(0, whole("step") or 0),
            first_step_at=number("first_step_at"),
            last_step_at=number("last_step_at"),
            step_s=number("step_s"),
            own_step_s=number("own_step_s"),
            checkpoint_s=max(0.0, number("checkpoint_s") or 0.0),
            checkpoints=max(0, whole("checkpoints") or 0),
            checkpoint_step=whole("checkpoint_step"),
        )


@dataclass(frozen=True)
class ReplicaSpan:
    """One replica's billed time: from its start (RUNNING) to its exit."""

    name: str
    started: float
    ended: float

    @property
    def pool(self) -> int:
        head = self.name.removeprefix("workerpool").split("-", 1)[0]
        return int(head) if head.isdigit() else 0

    @property
    def seconds(self) -> float:
        return max(0.0, self.ended - self.started)


@dataclass(frozen=True)
class AttemptInput:
    """One attempt of a managed job (or the one job of a plain one)."""

    number: int
    reason: str  # managed.reasons.Reason's value, or the job's state for a plain job
    created: float | None  # when it was asked for: queued from here to its first replica's start
    replicas: tuple[ReplicaSpan, ...] = ()
    ranks: tuple[RankRecord, ...] = ()
    stragglers: tuple[int, ...] = ()  # the ranks the monitor (or the ranks' own step times) flagged
    job: str = ""
    machine_type: str = ""
    location: str = ""
    strategy: str = "STANDARD"

    @property
    def started(self) -> float | None:
        return min((r.started for r in self.replicas), default=None)

    @property
    def ended(self) -> float | None:
        return max((r.ended for r in self.replicas), default=None)

    @property
    def queued_s(self) -> float:
        start = self.started
        if self.created is None or start is None:
            return 0.0
        return max(0.0, start - self.created)

    @property
    def running_s(self) -> float:
        start, end = self.started, self.ended
        return max(0.0, end - start) if start is not None and end is not None else 0.0

    @property
    def loses_work(self) -> bool:
        return self.reason in LOSING_REASONS

    @property
    def interrupted(self) -> bool:
        return self.reason in INTERRUPTIONS and any(r.steps for r in self.ranks)


@dataclass(frozen=True)
class History:
    """What this project's earlier attempts on the same machines saw (`vertexdist.goodput.history`)."""

    running_hours: float = 0.0
    interruptions: int = 0
    stockouts: int = 0
    attempts: int = 0
    startup_s_per_attempt: float = 0.0  # wall seconds
    recomputed_s_per_interruption: float | None = None  # wall seconds of steps lost per interruption

    @property
    def per_hour(self) -> float | None:
        return self.interruptions / self.running_hours if self.running_hours > 0 else None


@dataclass(frozen=True)
class LedgerInput:
    attempts: tuple[AttemptInput, ...]
    # USD per replica-hour of each pool, at the prices `estimate` uses (None: not in the price table).
    price_per_replica_hour: Mapping[int, float | None] = field(default_factory=dict)
    history: History | None = None
