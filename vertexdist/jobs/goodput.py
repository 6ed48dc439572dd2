"""`vertexdist goodput JOB|MANAGED_ID`: the ledger's inputs gathered from where a job left them, then
`vertexdist.goodput.ledger.compute`.

- The times: a local run's replicas' own (its run folder's recorded events, RUNNING to their exit); an
  emulator or Vertex job's from the job resource (every replica from the job's start to its end, as Vertex
  bills them). Queued: the job's creation to its first replica's start.
- The ranks' steps, step times and checkpoints: their last heartbeats, from the run folder (local, emulator)
  or the replicas' log lines (Vertex, `vertexdist.health.log_scan`); the stragglers the monitor flagged, or
  those the heartbeats show.
- A managed job: each attempt's job in order, with the reason the controller recorded.
- Prices: `estimate`'s (`estimate.costs.job_spec_costs` of the job's own spec, its region and scheduling
  strategy), per replica-hour of each pool.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertexdist.backends.base import TERMINAL_STATES, JobStatus, LogChunk, StateChange
from vertexdist.goodput.beats import last_beats
from vertexdist.goodput.inputs import AttemptInput, History, LedgerInput, RankRecord, ReplicaSpan
from vertexdist.goodput.ledger import Ledger, compute
from vertexdist.health.folder import read_beats, read_summary
from vertexdist.health.verdict import stragglers
from vertexdist.jobs.where import JobPlace
from vertexdist.managed.reasons import reason_of
from vertexdist.spec.health import DEFAULT_STRAGGLER_RATIO
from vertexdist.wire.timestamps import parse_ns

if TYPE_CHECKING:
    from vertexdist.managed.store import Store

REPLICA_ENDS = ("SUCCEEDED", "FAILED", "STOPPED", "CANCELLED")
MANAGED_PREFIX = "m-"


def _seconds(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return parse_ns(text) / 1e9
    except ValueError:
        return None


def prices_of(spec: Mapping[str, Any], region: str | None) -> dict[int, float | None]:
    """USD per replica-hour of each pool of a job's spec, at `estimate`'s prices for its strategy."""
    from vertexdist.estimate.costs import job_spec_costs

    costs = job_spec_costs(spec, region or "")
    found: dict[int, float | None] = {}
    for pool in costs.pools:
        per_hour = pool.per_hour(costs.strategy)
        found[pool.pool] = per_hour / pool.replicas if per_hour is not None and pool.replicas else None
    return found


def _replica_names(spec: Mapping[str, Any]) -> list[str]:
    names = []
    pools = spec.get("workerPoolSpecs")
    for index, pool in enumerate(pools if isinstance(pools, list) else []):
        count = pool.get("replicaCount") if isinstance(pool, Mapping) else None
        try:
            replicas = int(count or 0)
        except (TypeError, ValueError):
            replicas = 0
        names += [f"workerpool{index}-{i}" for i in range(replicas)]
    return names


def replica_spans(
    status: JobStatus, timeline: list[StateChange], now: float | None = None
) -> tuple[ReplicaSpan, ...]:
    """Each replica's billed span: its own RUNNING to its last exit where the timeline has replica steps (a
    local run); else every replica of the spec from the job's start to its end (now, while it runs)."""
    clock = time.time() if now is None else now
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    for change in timeline:
        when = _seconds(change.time)
        if change.replica is None or when is None:
            continue
        if change.state == "RUNNING":
            starts.setdefault(change.replica, when)
        elif change.state in REPLICA_ENDS:
            ends[change.replica] = when
    if starts:
        job_end = _seconds(status.end_time)
        return tuple(
            ReplicaSpan(name, start, ends.get(name, job_end if job_end is not None else clock))
            for name, start in sorted(starts.items())
        )
    start = _seconds(status.start_time)
    if start is None:
        return ()
    end = _seconds(status.end_time)
    if end is None:
        end = clock if status.state not in TERMINAL_STATES else start
    return tuple(ReplicaSpan(name, start, end) for name in _replica_names(status.spec))


def _strategy(spec: Mapping[str, Any]) -> str:
    return str((spec.get("scheduling") or {}).get("strategy") or "STANDARD")


def _machine(spec: Mapping[str, Any]) -> str:
    pools = spec.get("workerPoolSpecs") or [{}]
    first = pools[0] if isinstance(pools, list) and pools and isinstance(pools[0], Mapping) else {}
    return str((first.get("machineSpec") or {}).get("machineType") or "")


def _beats_and_flagged(folder: Path | None, backend: Any, name: str) -> tuple[list[dict[str, Any]], set[int]]:
    if folder is not None:
        beats = read_beats(folder)
        listed = read_summary(folder).get("stragglers") or []
        flagged = {s["rank"] for s in listed if isinstance(s, dict) and isinstance(s.get("rank"), int)}
    else:
        from vertexdist.backends.watch import read_logs

        chunks: list[LogChunk] = []
        read_logs(backend, name, None, None, chunks.append)
        beats = last_beats([(c.text, c.payload) for c in chunks])
        flagged = set()
    with contextlib.suppress(TypeError, ValueError, KeyError):  # a heartbeat of the wrong shape flags none
        flagged |= {s.rank for s in stragglers(beats, DEFAULT_STRAGGLER_RATIO)}
    return beats, flagged


def attempt_of(
    backend: Any,
    name: str,
    folder: Path | None,
    *,
    number: int = 1,
    reason: str | None = None,
    created: float | None = None,
) -> tuple[AttemptInput, dict[int, float | None]]:
    """One job's part of the ledger from its backend (`folder`: its health folder, None: its logs), and its
    pools' prices per replica-hour."""
    status = backend.describe(name)
    timeline = backend.timeline(name)
    beats, flagged = _beats_and_flagged(folder, backend, name)
    ranks = []
    for beat in beats:
        try:
            ranks.append(RankRecord.from_beat(beat))
        except (KeyError, TypeError, ValueError):
            continue
    attempt = AttemptInput(
        number=number,
        reason=reason or reason_of(status).value,
        created=created if created is not None else _seconds(status.create_time),
        replicas=replica_spans(status, timeline),
        ranks=tuple(ranks),
        stragglers=tuple(sorted(flagged)),
        job=name,
        machine_type=_machine(status.spec),
        location=status.location or "",
        strategy=_strategy(status.spec),
    )
    return attempt, prices_of(status.spec, status.location)


def attempt_input(
    job: str,
    place: JobPlace,
    *,
    number: int = 1,
    reason: str | None = None,
    created: float | None = None,
) -> tuple[AttemptInput, dict[int, float | None]]:
    """One job's part of the ledger (JOB as `vertexdist logs` takes it), and its pools' prices."""
    from vertexdist.jobs.ranks import heartbeat_folder
    from vertexdist.jobs.where import open_job

    folder = heartbeat_folder(job, place)
    with open_job(job, place) as (backend, name):
        return attempt_of(backend, name, folder, number=number, reason=reason, created=created)


def is_managed_id(ref: str) -> bool:
    from vertexdist.managed.store import new_managed_id

    shape = new_managed_id(0.0)
    text = ref.strip()
    return text.startswith(MANAGED_PREFIX) and len(text) == len(shape) and text[10] == "-"


def managed_input(store: Store, managed_id: str, place: JobPlace) -> LedgerInput:
    """Every attempt of a managed job that reached a job, with the reason the controller recorded."""
    managed = store.get(managed_id)
    attempts: list[AttemptInput] = []
    prices: dict[int, float | None] = {}
    for attempt in store.attempts(managed_id):
        if not attempt.job:
            continue
        ref, where = attempt.job, place
        if managed.backend == "local":
            runs = Path(str(managed.target.get("runs_dir") or ".vertexdist/runs"))
            ref = str(runs / attempt.job)
        else:
            target = managed.target
            where = JobPlace(
                project=str(target.get("project") or "") or place.project,
                location=attempt.location or place.location,
                endpoint=str(target.get("endpoint") or "") or place.endpoint,
                transport=str(target.get("transport") or "") or place.transport,
                emulator_dir=place.emulator_dir,
            )
        reason = attempt.reason if attempt.reason != "RUNNING" or attempt.ended is None else None
        found, priced = attempt_input(
            ref, where, number=attempt.number, reason=reason, created=attempt.started
        )
        attempts.append(found)
        prices = {**priced, **prices}
    return LedgerInput(tuple(attempts), prices)


def ledger_of(
    ref: str,
    place: JobPlace,
    history: Callable[[AttemptInput], History | None] | None = None,
    *,
    record: bool = True,
) -> Ledger:
    """The ledger of a job (what `vertexdist logs` takes) or of a managed job (its id); `record`: its
    ended attempts are counted in this project's failure history (`goodput.history`, once each)."""
    if is_managed_id(ref):
        from vertexdist.managed.service import open_store

        store = open_store()
        try:
            data = managed_input(store, ref.strip(), place)
        finally:
            store.close()
    else:
        attempt, prices = attempt_input(ref, place)
        data = LedgerInput((attempt,), prices)
    if history is not None and data.attempts:
        data = LedgerInput(data.attempts, data.price_per_replica_hour, history(data.attempts[-1]))
    ledger = compute(data)
    if record:
        from vertexdist.goodput.history import record as keep

        keep(data.attempts, ledger)
    return ledger


def end_of_run_line(
    ref: str,
    place: JobPlace | None = None,
    *,
    backend: Any = None,
    folder: Path | None = None,
    shown: str | None = None,
) -> str | None:
    """The line `local-run` and `submit --follow` end with: goodput, the biggest loss and its cost, and the
    command that shows the whole ledger (`vertexdist goodput SHOWN`); None where the ledger cannot be read
    (it never fails a run). With `backend`, `ref` is the job's name there and `folder` its health folder."""
    from vertexdist.goodput.view import summary_line

    try:
        if backend is not None:
            attempt, prices = attempt_of(backend, ref, folder)
            data = LedgerInput((attempt,), prices)
            ledger = compute(data)
            from vertexdist.goodput.history import record

            record(data.attempts, ledger)
        else:
            ledger = ledger_of(ref, place or JobPlace())
    except Exception:  # the ledger is a report: a job whose files or logs cannot be read just has none
        return None
    if not ledger.billed_s:
        return None
    return f"{summary_line(ledger)}; the ledger: vertexdist goodput {shown or ref}"


def ledger_at(backend: Any, name: str, folder: Path | None) -> Ledger | None:
    """The ledger of job `name` on `backend` (`folder`: its health folder, None: its logs); None where it
    cannot be read (`describe` shows it when it can)."""
    try:
        attempt, prices = attempt_of(backend, name, folder)
        return compute(LedgerInput((attempt,), prices))
    except Exception:  # a report beside others: a job whose heartbeats cannot be read just has none
        return None
