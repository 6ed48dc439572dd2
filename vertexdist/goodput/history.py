"""This project's failure history (`.vertexdist/failure-history.json`): each attempt a ledger has counted,
by machine type, region and scheduling strategy: how long it ran, whether it was interrupted (preempted,
hung, lost) or refused for capacity (stockout), its start-up and the time its lost steps took. The ledger's
checkpoint advice takes its mean time between failures from here when the job itself saw none; `estimate`
its Spot preemption rate and the time a preemption costs.

`add` and `summary` are pure; `record` and `load` read and write the file (private, replaced whole)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from vertexdist.goodput.inputs import AttemptInput, History
from vertexdist.goodput.ledger import Ledger

HISTORY_PATH = Path(".vertexdist/failure-history.json")
KEEP_JOBS = 5000  # the job names remembered, so an attempt is counted once however often it is read


def key_of(machine_type: str, location: str, strategy: str) -> str:
    return f"{machine_type or '?'}|{location or '?'}|{strategy or 'STANDARD'}"


def add(data: Mapping[str, Any], attempts: Iterable[AttemptInput], ledger: Ledger) -> dict[str, Any]:
    """`data` with the ended attempts it has not counted yet (by job name) added. Pure."""
    entries: dict[str, dict[str, float]] = {k: dict(v) for k, v in dict(data.get("entries") or {}).items()}
    seen: list[str] = list(data.get("jobs") or [])
    known = set(seen)
    by_number = {a.number: a for a in ledger.attempts}
    for attempt in attempts:
        if not attempt.job or attempt.job in known or attempt.reason in ("RUNNING", ""):
            continue
        counted = by_number.get(attempt.number)
        entry = entries.setdefault(
            key_of(attempt.machine_type, attempt.location, attempt.strategy),
            {"attempts": 0, "running_s": 0.0, "interruptions": 0, "stockouts": 0, "startup_s": 0.0,
             "recomputed_s": 0.0},
        )  # fmt: skip
        replicas = max(1, len(attempt.replicas))
        entry["attempts"] += 1
        entry["running_s"] += attempt.running_s
        entry["interruptions"] += 1 if attempt.interrupted else 0
        entry["stockouts"] += 1 if attempt.reason == "STOCKOUT" else 0
        if counted is not None:  # wall seconds: the replica-seconds over the replicas
            entry["startup_s"] += counted.categories["startup"] / replicas
            entry["recomputed_s"] += counted.categories["recomputed"] / replicas
        seen.append(attempt.job)
        known.add(attempt.job)
    return {"entries": entries, "jobs": seen[-KEEP_JOBS:]}


def summary(data: Mapping[str, Any], machine_type: str, location: str, strategy: str) -> History | None:
    """What the history holds for these machines; None when it has no attempt of them. Pure."""
    entry = dict(data.get("entries") or {}).get(key_of(machine_type, location, strategy))
    if not isinstance(entry, Mapping) or not entry.get("attempts"):
        return None
    interruptions = int(entry.get("interruptions") or 0)
    return History(
        running_hours=float(entry.get("running_s") or 0.0) / 3600.0,
        interruptions=interruptions,
        stockouts=int(entry.get("stockouts") or 0),
        attempts=int(entry.get("attempts") or 0),
        startup_s_per_attempt=float(entry.get("startup_s") or 0.0) / int(entry["attempts"]),
        recomputed_s_per_interruption=(
            float(entry.get("recomputed_s") or 0.0) / interruptions if interruptions else None
        ),
    )


def load(path: Path = HISTORY_PATH) -> dict[str, Any]:
    """The history file's contents; {} when there is none or it does not read as one."""
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get("entries", {}), dict):
            return data
    return {}


def record(attempts: Iterable[AttemptInput], ledger: Ledger, path: Path = HISTORY_PATH) -> None:
    """Count the ledger's ended attempts in the history file (never twice); a file that cannot be written
    leaves the history as it was."""
    from vertexdist.private_files import write_private_json

    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_private_json(path, add(load(path), attempts, ledger))


def history_for(attempt: AttemptInput, path: Path = HISTORY_PATH) -> History | None:
    """The history of the machines `attempt` ran on."""
    return summary(load(path), attempt.machine_type, attempt.location, attempt.strategy)
