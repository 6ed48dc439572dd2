"""The project's failure history: each ended attempt counted once, by machine type, region and strategy."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertexdist.goodput.history import history_for, load, record, summary
from vertexdist.goodput.inputs import AttemptInput, LedgerInput, RankRecord, ReplicaSpan
from vertexdist.goodput.ledger import compute


def _attempt(number: int, reason: str, job: str, start: float, end: float) -> AttemptInput:
    ranks = (RankRecord(0, "workerpool0-0", 30, start + 60.0, end - 10.0, checkpoint_step=20, checkpoints=1),)
    return AttemptInput(
        number, reason, start, (ReplicaSpan("workerpool0-0", start, end),), ranks,
        job=job, machine_type="a2-highgpu-1g", location="us-central1", strategy="SPOT",
    )  # fmt: skip


def test_attempts_are_counted_once_by_their_machines(tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    attempts = (
        _attempt(1, "PREEMPTED", "job-1", 0.0, 1800.0),
        _attempt(2, "PREEMPTED", "job-2", 2000.0, 5600.0),
        _attempt(3, "SUCCEEDED", "job-3", 6000.0, 7800.0),
    )
    ledger = compute(LedgerInput(attempts, {0: 1.0}))
    record(attempts, ledger, path)
    record(attempts, ledger, path)  # read again: nothing counted twice
    seen = summary(load(path), "a2-highgpu-1g", "us-central1", "SPOT")
    assert seen is not None
    assert (seen.attempts, seen.interruptions) == (3, 2)
    assert seen.running_hours == pytest.approx(7200.0 / 3600)
    assert seen.per_hour == pytest.approx(1.0)
    assert seen.startup_s_per_attempt == pytest.approx(60.0)
    # Each preemption lost 10 of its 30 steps: a third of its stepping time.
    assert seen.recomputed_s_per_interruption == pytest.approx(((1790 - 60) + (5590 - 2060)) / 3 / 2)
    assert history_for(attempts[0], path) == seen
    assert summary(load(path), "a2-highgpu-1g", "us-central1", "STANDARD") is None


def test_a_history_file_that_does_not_read_is_no_history(tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    path.write_text("[1, 2")
    assert load(path) == {}
