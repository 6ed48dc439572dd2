"""The goodput ledger: a job's billed replica-seconds split by where they went (docs/guide/goodput.md).

Each replica's billed time, from its start to its exit, is cut at its ranks' first and last steps:

- start-up: the start to its first step;
- hung (an attempt that ended HUNG) or tail (any other): its last step to its exit;
- the steps between are checkpointing (the saves the ranks timed), waiting on stragglers (for each rank
  that is not a flagged straggler: the straggler's own step time less its own, per step), and the rest,
  productive or recomputed: an attempt that ended in a failure lost the steps after its last checkpoint
  (steps - checkpoint step, counted from its ranks' step numbers), a share of its stepping time equal to
  their share of its steps.
- a replica with no ranks (a reduction server) splits as its attempt's workers do.

Queued time (asked for, no replica running yet) is shown, not billed. Pure.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vertexdist.goodput.inputs import AttemptInput, LedgerInput, RankRecord, ReplicaSpan

CATEGORIES = ("startup", "productive", "recomputed", "hung", "straggler_wait", "checkpoint", "tail")
LABELS = {
    "startup": "start-up",
    "productive": "productive",
    "recomputed": "recomputed",
    "hung": "hung",
    "straggler_wait": "waiting on stragglers",
    "checkpoint": "checkpointing",
    "tail": "tail",
}


def _empty() -> dict[str, float]:
    return dict.fromkeys(CATEGORIES, 0.0)


@dataclass
class AttemptLedger:
    number: int
    reason: str
    job: str
    queued_s: float
    steps: int  # the steps this attempt made
    kept_steps: int  # of them, those that reached the final model
    recomputed_steps: int
    checkpoint_step: int | None
    categories: dict[str, float] = field(default_factory=_empty)
    by_pool: dict[int, dict[str, float]] = field(default_factory=dict)
    straggler_wait_by_rank: dict[int, float] = field(default_factory=dict)
    checkpoints: int = 0
    checkpoint_s: float = 0.0  # the chief's saves
    stepping_s: float = 0.0  # the chief's first to last step

    @property
    def billed_s(self) -> float:
        return sum(self.categories.values())


@dataclass
class Ledger:
    attempts: list[AttemptLedger]
    price_per_replica_hour: dict[int, float | None]
    queued_s: float
    categories: dict[str, float]
    by_pool: dict[int, dict[str, float]]
    straggler_wait_by_rank: dict[int, float]
    advice: list[dict[str, Any]] = field(default_factory=list)

    @property
    def billed_s(self) -> float:
        return sum(self.categories.values())

    @property
    def goodput(self) -> float | None:
        billed = self.billed_s
        return self.categories["productive"] / billed if billed > 0 else None

    @property
    def priced(self) -> bool:
        return all(self.price_per_replica_hour.get(pool) is not None for pool in self.by_pool)

    def dollars_of(self, seconds_by_pool: Mapping[int, float]) -> float | None:
        total = 0.0
        for pool, seconds in seconds_by_pool.items():
            price = self.price_per_replica_hour.get(pool)
            if price is None:
                return None
            total += price * seconds / 3600.0
        return total

    def dollars(self) -> dict[str, float | None]:
        """Each category's dollars, and the total; None where a pool has no price."""
        found: dict[str, float | None] = {}
        for name in CATEGORIES:
            found[name] = self.dollars_of({pool: cats[name] for pool, cats in self.by_pool.items()})
        parts = [v for v in found.values() if v is not None]
        found["total"] = sum(parts) if len(parts) == len(CATEGORIES) else None
        return found

    def steps(self) -> dict[str, int]:
        return {
            "final": sum(a.kept_steps for a in self.attempts),
            "recomputed": sum(a.recomputed_steps for a in self.attempts),
        }

    def biggest_loss(self) -> tuple[str, float] | None:
        """The category other than productive with the most replica-seconds, if any has some."""
        losses = [(name, s) for name, s in self.categories.items() if name != "productive" and s > 0]
        return max(losses, key=lambda item: item[1]) if losses else None

    def to_json(self) -> dict[str, Any]:
        goodput = self.goodput
        return {
            "billed_replica_s": round(self.billed_s, 3),
            "queued_s": round(self.queued_s, 3),
            "categories": {k: round(v, 3) for k, v in self.categories.items()},
            "dollars": {k: (round(v, 6) if v is not None else None) for k, v in self.dollars().items()},
            "price_per_replica_hour": {
                f"workerpool{pool}": price for pool, price in sorted(self.price_per_replica_hour.items())
            },
            "goodput": round(goodput, 4) if goodput is not None else None,
            "steps": self.steps(),
            "attempts": [
                {
                    "number": a.number,
                    "job": a.job,
                    "reason": a.reason,
                    "queued_s": round(a.queued_s, 3),
                    "billed_replica_s": round(a.billed_s, 3),
                    "steps": a.steps,
                    "checkpoint_step": a.checkpoint_step,
                    "recomputed_steps": a.recomputed_steps,
                    "checkpoints": a.checkpoints,
                    "categories": {k: round(v, 3) for k, v in a.categories.items()},
                }
                for a in self.attempts
            ],
            "straggler_wait_by_rank": {
                str(rank): round(s, 3) for rank, s in sorted(self.straggler_wait_by_rank.items())
            },
            "advice": self.advice,
        }


def _clamp(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


def _chief(ranks: Iterable[RankRecord]) -> RankRecord | None:
    """Rank 0, else the lowest rank: its step and checkpoint counts are the attempt's."""
    return min(ranks, key=lambda r: r.rank, default=None)


def _attempt_steps(attempt: AttemptInput) -> tuple[int, int | None, int]:
    """(steps made, the step count at the last checkpoint, steps recomputed)."""
    chief = _chief(attempt.ranks)
    if chief is None:
        return 0, None, 0
    steps = max(r.steps for r in attempt.ranks if r.replica == chief.replica) or chief.steps
    saved = chief.checkpoint_step
    if saved is None and chief.checkpoints:
        saved = steps
    saved = min(saved, steps) if saved is not None else None
    lost = steps - (saved or 0) if attempt.loses_work else 0
    return steps, saved, lost


def _replica_split(
    span: ReplicaSpan,
    ranks: list[RankRecord],
    stragglers: list[RankRecord],
    hung: bool,
    lost_share: float,
) -> tuple[dict[str, float], dict[int, float]]:
    cats = _empty()
    first_times = [r.first_step_at for r in ranks if r.first_step_at is not None]
    last_times = [r.last_step_at for r in ranks if r.last_step_at is not None]
    if not first_times or not last_times:
        cats["hung" if hung and any(r.steps for r in ranks) else "startup"] = span.seconds
        return cats, {}
    first = _clamp(min(first_times), span.started, span.ended)
    last = _clamp(max(last_times), first, span.ended)
    cats["startup"] = first - span.started
    cats["hung" if hung else "tail"] = span.ended - last
    stepping = last - first
    checkpoint = min(stepping, max(r.checkpoint_s for r in ranks))
    rest = stepping - checkpoint
    waits: dict[int, float] = {}
    flagged = {s.rank for s in stragglers}
    waiting = [r for r in ranks if r.rank not in flagged and r.own_step_s is not None]
    if stragglers and waiting:
        slowest = max(float(s.own_step_s or 0.0) for s in stragglers)
        per_rank = []
        for rank in waiting:
            step_s = float(rank.step_s or 0.0)
            per_step = _clamp(slowest - float(rank.own_step_s or 0.0), 0.0, step_s)
            per_rank.append(per_step * max(0, rank.steps - 1))
        wait = min(rest, statistics.fmean(per_rank)) if per_rank else 0.0
        rest -= wait
        cats["straggler_wait"] = wait
        excess = {s.rank: max(0.0, float(s.own_step_s or 0.0)) for s in stragglers}
        total = sum(excess.values()) or 1.0
        waits = {rank: wait * share / total for rank, share in excess.items()}
    cats["recomputed"] = rest * lost_share
    cats["productive"] = rest - cats["recomputed"]
    cats["checkpoint"] = checkpoint
    return cats, waits


def _add(into: dict[Any, float], more: Mapping[Any, float]) -> None:
    for key, value in more.items():
        into[key] = into.get(key, 0.0) + value


def attempt_ledger(attempt: AttemptInput) -> AttemptLedger:
    steps, saved, lost = _attempt_steps(attempt)
    kept = steps - lost
    chief = _chief(attempt.ranks)
    found = AttemptLedger(
        number=attempt.number,
        reason=attempt.reason,
        job=attempt.job,
        queued_s=attempt.queued_s,
        steps=steps,
        kept_steps=kept,
        recomputed_steps=lost,
        checkpoint_step=saved,
        checkpoints=chief.checkpoints if chief else 0,
        checkpoint_s=chief.checkpoint_s if chief else 0.0,
        stepping_s=(
            max(0.0, chief.last_step_at - chief.first_step_at)
            if chief and chief.first_step_at is not None and chief.last_step_at is not None
            else 0.0
        ),
    )
    hung = attempt.reason == "HUNG"
    lost_share = lost / steps if steps else 0.0
    flagged = set(attempt.stragglers)
    stragglers = [r for r in attempt.ranks if r.rank in flagged and r.own_step_s is not None]
    by_replica: dict[str, list[RankRecord]] = {}
    for rank in attempt.ranks:
        by_replica.setdefault(rank.replica, []).append(rank)
    without: list[ReplicaSpan] = []
    for span in attempt.replicas:
        ranks = by_replica.get(span.name, [])
        if not ranks:
            without.append(span)
            continue
        cats, waits = _replica_split(span, ranks, stragglers, hung, lost_share)
        _add(found.categories, cats)
        _add(found.by_pool.setdefault(span.pool, _empty()), cats)
        _add(found.straggler_wait_by_rank, waits)
    worked = sum(found.categories.values())
    for span in without:  # a reduction server (or a replica whose ranks left no heartbeat)
        if worked > 0:
            cats = {k: span.seconds * v / worked for k, v in found.categories.items()}
        else:
            cats = _empty()
            cats["startup"] = span.seconds
        _add(found.categories, cats)
        _add(found.by_pool.setdefault(span.pool, _empty()), cats)
    return found


def compute(data: LedgerInput) -> Ledger:
    """The ledger of a job (one attempt) or a managed job (its attempts, in order)."""
    from vertexdist.goodput.advice import advise

    attempts = [attempt_ledger(a) for a in sorted(data.attempts, key=lambda a: a.number)]
    categories = _empty()
    by_pool: dict[int, dict[str, float]] = {}
    waits: dict[int, float] = {}
    for attempt in attempts:
        _add(categories, attempt.categories)
        for pool, cats in attempt.by_pool.items():
            _add(by_pool.setdefault(pool, _empty()), cats)
        _add(waits, attempt.straggler_wait_by_rank)
    # The billed pools' prices (all the job's, when nothing was billed yet).
    prices = {pool: data.price_per_replica_hour.get(pool) for pool in by_pool} or dict(
        data.price_per_replica_hour
    )
    ledger = Ledger(
        attempts=attempts,
        price_per_replica_hour=dict(sorted(prices.items())),
        queued_s=sum(a.queued_s for a in attempts),
        categories=categories,
        by_pool=dict(sorted(by_pool.items())),
        straggler_wait_by_rank=dict(sorted(waits.items())),
    )
    ledger.advice = advise(ledger, data)
    return ledger
