"""The goodput ledger from plain inputs: each category cut where the issue says, the sums, the dollars."""

from __future__ import annotations

import json
import math

import pytest

from vertexdist.goodput.inputs import AttemptInput, History, LedgerInput, RankRecord, ReplicaSpan
from vertexdist.goodput.ledger import CATEGORIES, compute
from vertexdist.goodput.view import summary_line, table

PRICES = {0: 3.6, 1: 3.6, 2: 0.36}  # USD per replica-hour: 0.001 a replica-second


def rank(
    r: int, replica: str, steps: int, first: float, last: float, **more: float | int | None
) -> RankRecord:
    return RankRecord(
        rank=r,
        replica=replica,
        steps=steps,
        first_step_at=first,
        last_step_at=last,
        step_s=(last - first) / max(1, steps - 1),
        own_step_s=more.pop("own_step_s", 0.01),
        **more,  # type: ignore[arg-type]
    )


def two_replicas(start: float, end: float) -> tuple[ReplicaSpan, ...]:
    return (ReplicaSpan("workerpool0-0", start, end), ReplicaSpan("workerpool1-0", start, end))


def test_an_undisturbed_job_is_startup_productive_checkpoint_and_tail() -> None:
    ranks = (
        rank(0, "workerpool0-0", 100, 110.0, 200.0, checkpoint_s=6.0, checkpoints=3, checkpoint_step=90),
        rank(1, "workerpool1-0", 100, 112.0, 201.0, checkpoint_s=6.0, checkpoints=3, checkpoint_step=90),
    )
    data = LedgerInput((AttemptInput(1, "SUCCEEDED", 95.0, two_replicas(100.0, 205.0), ranks),), PRICES)
    ledger = compute(data)
    cats = ledger.categories
    assert cats["startup"] == pytest.approx(10.0 + 12.0)
    assert cats["tail"] == pytest.approx(5.0 + 4.0)
    assert cats["checkpoint"] == pytest.approx(12.0)
    assert cats["productive"] == pytest.approx((90 - 6) + (89 - 6))
    assert cats["recomputed"] == cats["hung"] == cats["straggler_wait"] == 0.0
    assert ledger.billed_s == pytest.approx(2 * 105.0)
    assert ledger.queued_s == pytest.approx(5.0)
    assert ledger.goodput == pytest.approx(cats["productive"] / 210.0)
    assert ledger.steps() == {"final": 100, "recomputed": 0}
    assert ledger.dollars()["total"] == pytest.approx(0.21)


def test_a_managed_job_recomputes_exactly_the_steps_after_each_failures_checkpoint() -> None:
    # Attempt 1: preempted after step 23, checkpoint at 20. Attempt 2: hung after step 37 (checkpoint 30),
    # the hang noticed 40 s later. Attempt 3: resumes from 30 and runs 50 steps.
    a1 = AttemptInput(
        1,
        "PREEMPTED",
        0.0,
        two_replicas(10.0, 60.0),
        tuple(rank(r, f"workerpool{r}-0", 23, 20.0, 43.0, checkpoints=2, checkpoint_s=1.0,
                   checkpoint_step=20) for r in (0, 1)),
    )  # fmt: skip
    a2 = AttemptInput(
        2,
        "HUNG",
        61.0,
        two_replicas(70.0, 160.0),
        tuple(rank(r, f"workerpool{r}-0", 37, 80.0, 116.0, checkpoints=3, checkpoint_s=1.5,
                   checkpoint_step=30) for r in (0, 1)),
    )  # fmt: skip
    a3 = AttemptInput(
        3,
        "SUCCEEDED",
        161.0,
        two_replicas(170.0, 235.0),
        tuple(rank(r, f"workerpool{r}-0", 50, 180.0, 229.0) for r in (0, 1)),
    )
    ledger = compute(LedgerInput((a3, a1, a2), PRICES))
    assert [a.recomputed_steps for a in ledger.attempts] == [3, 7, 0]
    assert ledger.steps() == {"final": 20 + 30 + 50, "recomputed": 10}
    by_attempt = {a.number: a.categories for a in ledger.attempts}
    assert by_attempt[2]["hung"] == pytest.approx(2 * 44.0)
    assert by_attempt[1]["hung"] == 0.0 and by_attempt[1]["tail"] == pytest.approx(2 * 17.0)
    assert by_attempt[1]["recomputed"] == pytest.approx(2 * (23.0 - 1.0) * 3 / 23)
    assert by_attempt[2]["recomputed"] == pytest.approx(2 * (36.0 - 1.5) * 7 / 37)
    assert ledger.billed_s == pytest.approx(2 * (50 + 90 + 65))
    assert sum(ledger.categories[c] for c in CATEGORIES) == pytest.approx(ledger.billed_s)
    assert ledger.queued_s == pytest.approx(10 + 9 + 9)
    dollars = ledger.dollars()
    for name in CATEGORIES:
        assert dollars[name] == pytest.approx(ledger.categories[name] * 3.6 / 3600)
    out = ledger.to_json()
    assert set(out["categories"]) == set(CATEGORIES)
    assert out["steps"] == {"final": 100, "recomputed": 10}
    assert out["price_per_replica_hour"] == {"workerpool0": 3.6, "workerpool1": 3.6}
    assert "10 steps recomputed" in summary_line(ledger)
    assert "attempt 2 (HUNG): 37 steps, last checkpoint at 30, 7 recomputed" in table(ledger)


def test_a_failure_with_no_checkpoint_loses_all_its_steps() -> None:
    a1 = AttemptInput(1, "PREEMPTED", None, two_replicas(0.0, 30.0),
                      tuple(rank(r, f"workerpool{r}-0", 12, 5.0, 25.0) for r in (0, 1)))  # fmt: skip
    ledger = compute(LedgerInput((a1,), PRICES))
    assert ledger.steps() == {"final": 0, "recomputed": 12}
    assert ledger.categories["productive"] == 0.0


def test_a_reduction_server_splits_as_its_workers_do() -> None:
    spans = (*two_replicas(0.0, 100.0), ReplicaSpan("workerpool2-0", 0.0, 100.0))
    ranks = tuple(rank(r, f"workerpool{r}-0", 50, 20.0, 90.0) for r in (0, 1))
    ledger = compute(LedgerInput((AttemptInput(1, "SUCCEEDED", 0.0, spans, ranks),), PRICES))
    server = ledger.by_pool[2]
    assert server["startup"] == pytest.approx(20.0)
    assert server["productive"] == pytest.approx(70.0)
    assert server["tail"] == pytest.approx(10.0)
    assert ledger.dollars()["total"] == pytest.approx(0.2 + 100 * 0.36 / 3600)


def test_the_ranks_wait_on_a_flagged_straggler() -> None:
    ranks = (
        rank(0, "workerpool0-0", 11, 10.0, 20.0, own_step_s=0.2),
        rank(1, "workerpool1-0", 11, 10.0, 20.0, own_step_s=0.9),
    )
    attempt = AttemptInput(1, "SUCCEEDED", 0.0, two_replicas(0.0, 20.0), ranks, stragglers=(1,))
    ledger = compute(LedgerInput((attempt,), PRICES))
    assert ledger.categories["straggler_wait"] == pytest.approx(0.7 * 10)
    assert ledger.straggler_wait_by_rank == {1: pytest.approx(7.0)}
    [advice] = [a for a in ledger.advice if a["kind"] == "straggler"]
    assert advice["rank"] == 1 and advice["usd"] == pytest.approx(0.007)


def test_the_advised_interval_is_young_daly_on_the_measured_save_and_mtbf() -> None:
    a1 = AttemptInput(1, "PREEMPTED", 0.0, two_replicas(0.0, 400.0),
                      tuple(rank(r, f"workerpool{r}-0", 100, 10.0, 390.0, checkpoints=4, checkpoint_s=8.0,
                                 checkpoint_step=80) for r in (0, 1)))  # fmt: skip
    a2 = AttemptInput(2, "SUCCEEDED", 400.0, two_replicas(410.0, 610.0),
                      tuple(rank(r, f"workerpool{r}-0", 60, 420.0, 600.0, checkpoints=2, checkpoint_s=4.0,
                                 checkpoint_step=60) for r in (0, 1)))  # fmt: skip
    ledger = compute(LedgerInput((a1, a2), PRICES))
    [advice] = [a for a in ledger.advice if a["kind"] == "checkpoint_interval"]
    save_s, mtbf_s = 12.0 / 6, (400.0 + 200.0) / 1
    assert advice["save_s"] == pytest.approx(save_s)
    assert advice["mtbf_s"] == pytest.approx(mtbf_s)
    assert advice["interval_s"] == pytest.approx(math.sqrt(2 * save_s * mtbf_s), abs=1e-3)
    used = (380.0 + 180.0) / 6
    assert advice["used_interval_s"] == pytest.approx(used, abs=1e-3)
    worked = sum(ledger.categories[c] for c in ("productive", "recomputed", "checkpoint")) * 0.001
    young = math.sqrt(2 * save_s * mtbf_s)
    expected = (save_s / used + used / (2 * mtbf_s) - save_s / young - young / (2 * mtbf_s)) * worked
    assert advice["saving_usd"] == pytest.approx(expected, abs=1e-4)


def test_without_interruptions_the_mtbf_comes_from_history() -> None:
    a1 = AttemptInput(1, "SUCCEEDED", 0.0, two_replicas(0.0, 100.0),
                      tuple(rank(r, f"workerpool{r}-0", 50, 5.0, 95.0, checkpoints=5, checkpoint_s=2.0,
                                 checkpoint_step=50) for r in (0, 1)))  # fmt: skip
    assert not [a for a in compute(LedgerInput((a1,), PRICES)).advice if a["kind"] == "checkpoint_interval"]
    history = History(running_hours=20.0, interruptions=4)
    [advice] = [
        a for a in compute(LedgerInput((a1,), PRICES, history)).advice if a["kind"] == "checkpoint_interval"
    ]
    assert advice["mtbf_s"] == pytest.approx(5 * 3600.0)
    assert advice["mtbf_from"] == "this project's history"
    assert advice["interval_s"] == pytest.approx(math.sqrt(2 * 0.4 * 18000.0), abs=1e-3)


def test_a_slow_start_up_is_advised_against() -> None:
    ranks = tuple(rank(r, f"workerpool{r}-0", 10, 60.0, 90.0) for r in (0, 1))
    ledger = compute(
        LedgerInput((AttemptInput(1, "SUCCEEDED", 0.0, two_replicas(0.0, 100.0), ranks),), PRICES)
    )
    [advice] = [a for a in ledger.advice if a["kind"] == "startup"]
    assert advice["share"] == pytest.approx(0.6)
    assert advice["saving_usd"] == pytest.approx(0.12)


def test_an_unpriced_pool_leaves_the_dollars_unknown_not_partial() -> None:
    ranks = tuple(rank(r, f"workerpool{r}-0", 10, 5.0, 9.0) for r in (0, 1))
    ledger = compute(
        LedgerInput((AttemptInput(1, "SUCCEEDED", 0.0, two_replicas(0.0, 10.0), ranks),), {0: 1.0})
    )
    assert ledger.dollars()["total"] is None
    assert "($-)" in summary_line(ledger) or "-" in summary_line(ledger)


def test_a_heartbeat_with_bad_fields_reads_them_as_missing() -> None:
    found = RankRecord.from_beat({"rank": 3, "step": "x", "first_step_at": True, "checkpoint_s": 2})
    assert (found.rank, found.steps, found.first_step_at, found.checkpoint_s) == (3, 0, None, 2.0)


def test_the_last_heartbeat_of_each_rank_is_read_from_the_newest_line_back() -> None:
    from vertexdist.goodput.beats import last_beats
    from vertexdist.shipped.vertexdist_launcher.health import log_line

    def line(rank: int, step: int) -> tuple[str, None]:
        return log_line({"rank": rank, "world_size": 2, "step": step}), None

    lines = [line(0, 1), line(1, 1), ("epoch 1 done", None), line(0, 5), line(1, 4)]
    payload = json.loads(line(0, 7)[0])
    lines.append(("vertexdist health: rank 0 step 7", payload))  # as Cloud Logging keeps it
    assert [(b["rank"], b["step"]) for b in last_beats(lines)] == [(0, 7), (1, 4)]


def test_the_guides_real_ledger_holds_the_ledgers_sums() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "goodput.md").read_text()
    shown = json.loads(text.split("## A real ledger", 1)[1].split("```json\n", 1)[1].split("\n```", 1)[0])
    cats, billed = shown["categories"], shown["billed_replica_s"]
    assert set(cats) == set(CATEGORIES) and sum(cats.values()) == pytest.approx(billed, rel=0.01)
    price = shown["price_per_replica_hour"]["workerpool0"]
    for name in CATEGORIES:
        assert shown["dollars"][name] == pytest.approx(cats[name] * price / 3600, abs=2e-6)
    assert shown["goodput"] == pytest.approx(cats["productive"] / billed, abs=1e-4)
    assert shown["steps"]["recomputed"] == sum(a["recomputed_steps"] for a in shown["attempts"])
    for attempt in shown["attempts"]:
        lost = attempt["steps"] - attempt["checkpoint_step"] if attempt["reason"] != "SUCCEEDED" else 0
        assert attempt["recomputed_steps"] == lost
    [advice] = [a for a in shown["advice"] if a["kind"] == "checkpoint_interval"]
    assert advice["interval_s"] == pytest.approx(math.sqrt(2 * advice["save_s"] * advice["mtbf_s"]), abs=2e-3)
