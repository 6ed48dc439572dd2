"""What a ledger advises (docs/guide/goodput.md, "Advice"). Pure.

- `checkpoint_interval`: Young's first-order optimum (J. W. Young, 1974; J. T. Daly, 2006), the interval
  between checkpoints that minimises the expected time lost to saves and to recomputed work:
  interval = sqrt(2 x save time x mean time between failures). `save_s` is the mean save the ranks timed;
  `mtbf_s` the job's running time over its interruptions (preempted, hung, lost), else this project's
  history for the same machines. Against the interval the job used (its stepping time over its saves), the
  expected overhead of an interval T is save/T + T/(2 x MTBF) of the stepping time; the difference, priced,
  is the saving.
- `startup`: start-up over a fifth of the billed time: a persistent resource (Vertex) or the warm pool
  (local runs) keeps machines and packages between jobs; the saving is at most the start-up's cost.
- `straggler`: each flagged straggler's cost, the seconds the other ranks waited on it, priced.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vertexdist.goodput.inputs import LedgerInput
    from vertexdist.goodput.ledger import Ledger

STARTUP_SHARE = 0.2


def young_daly_interval(save_s: float, mtbf_s: float) -> float:
    """sqrt(2 x save x MTBF): the checkpoint interval that minimises the expected lost time."""
    return math.sqrt(2.0 * save_s * mtbf_s)


def overhead(interval_s: float, save_s: float, mtbf_s: float) -> float:
    """The expected share of stepping time lost to saves and recomputation at `interval_s` (first order)."""
    return save_s / interval_s + interval_s / (2.0 * mtbf_s)


def _rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def checkpoint_advice(ledger: Ledger, data: LedgerInput) -> dict[str, Any] | None:
    saves = sum(a.checkpoints for a in ledger.attempts)
    if not saves:
        return None
    save_s = sum(a.checkpoint_s for a in ledger.attempts) / saves
    interruptions = sum(1 for a in data.attempts if a.interrupted)
    running_s = sum(a.running_s for a in data.attempts)
    mtbf_s: float | None = None
    source = "this job"
    if interruptions:
        mtbf_s = running_s / interruptions
    elif data.history is not None and data.history.per_hour:
        mtbf_s, source = 3600.0 / data.history.per_hour, "this project's history"
    if mtbf_s is None or save_s <= 0:
        return None
    interval = young_daly_interval(save_s, mtbf_s)
    stepping = sum(a.stepping_s for a in ledger.attempts)
    used = stepping / saves if stepping > 0 else None
    saving = None
    if used:
        share = overhead(used, save_s, mtbf_s) - overhead(interval, save_s, mtbf_s)
        cats = ("productive", "recomputed", "checkpoint")
        worked = ledger.dollars_of({p: sum(c[k] for k in cats) for p, c in ledger.by_pool.items()})
        saving = share * worked if worked is not None else None
    return {
        "kind": "checkpoint_interval",
        "save_s": round(save_s, 4),
        "mtbf_s": round(mtbf_s, 3),
        "mtbf_from": source,
        "interval_s": round(interval, 3),
        "used_interval_s": _rounded(used),
        "saving_usd": _rounded(saving, 6),
    }


def startup_advice(ledger: Ledger) -> dict[str, Any] | None:
    billed = ledger.billed_s
    startup = ledger.categories["startup"]
    if billed <= 0 or startup / billed <= STARTUP_SHARE:
        return None
    cost = ledger.dollars().get("startup")
    return {
        "kind": "startup",
        "share": round(startup / billed, 4),
        "startup_s": round(startup, 3),
        "saving_usd": _rounded(cost, 6),
        "what": "a persistent resource (Vertex: `persistent_resource_id`) or the warm pool (local-run --warm)"
        " keeps machines and packages between jobs",
    }


def straggler_advice(ledger: Ledger) -> list[dict[str, Any]]:
    found = []
    for rank, seconds in ledger.straggler_wait_by_rank.items():
        if seconds <= 0:
            continue
        share = seconds / (ledger.categories["straggler_wait"] or 1.0)
        waits = {p: c["straggler_wait"] * share for p, c in ledger.by_pool.items()}
        found.append(
            {
                "kind": "straggler",
                "rank": rank,
                "wait_replica_s": round(seconds, 3),
                "usd": _rounded(ledger.dollars_of(waits), 6),
            }
        )
    return found


def advise(ledger: Ledger, data: LedgerInput) -> list[dict[str, Any]]:
    advice: list[dict[str, Any]] = []
    for item in (checkpoint_advice(ledger, data), startup_advice(ledger)):
        if item is not None:
            advice.append(item)
    return advice + straggler_advice(ledger)
