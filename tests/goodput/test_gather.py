"""What the ledger's edge makes of a job's status and timeline: each replica's billed span, the prices."""

from __future__ import annotations

import pytest

from vertexdist.backends.base import JobStatus, StateChange
from vertexdist.goodput.inputs import ReplicaSpan
from vertexdist.jobs.goodput import is_managed_id, prices_of, replica_spans

SPEC = {
    "workerPoolSpecs": [
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1},
        {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 2},
    ],
    "scheduling": {"strategy": "SPOT"},
}


def _status(**times: str | None) -> JobStatus:
    return JobStatus(
        name="j", display_name="j", state="SUCCEEDED", spec=SPEC, location="us-central1", **times
    )


def test_a_local_runs_replicas_are_billed_from_their_own_start_to_their_last_exit() -> None:
    timeline = [
        StateChange("2026-01-01T00:00:00Z", "PENDING"),
        StateChange("2026-01-01T00:00:10Z", "RUNNING", "workerpool0-0"),
        StateChange("2026-01-01T00:00:12Z", "RUNNING", "workerpool1-0"),
        StateChange("2026-01-01T00:01:00Z", "FAILED", "workerpool1-0", 1),
        StateChange("2026-01-01T00:01:05Z", "SUCCEEDED", "workerpool1-0", 0),  # restarted, then done
        StateChange("2026-01-01T00:01:10Z", "SUCCEEDED", "workerpool0-0", 0),
    ]
    spans = replica_spans(_status(end_time="2026-01-01T00:01:10Z"), timeline)
    base = 1767225600.0
    assert spans == (
        ReplicaSpan("workerpool0-0", base + 10, base + 70),
        ReplicaSpan("workerpool1-0", base + 12, base + 65),
    )


def test_a_vertex_jobs_replicas_are_billed_from_the_jobs_start_to_its_end() -> None:
    status = _status(start_time="2026-01-01T00:00:30Z", end_time="2026-01-01T01:00:30Z")
    spans = replica_spans(status, [StateChange("2026-01-01T00:00:30Z", "RUNNING")])
    assert [s.name for s in spans] == ["workerpool0-0", "workerpool1-0", "workerpool1-1"]
    assert {s.seconds for s in spans} == {3600.0}
    assert replica_spans(_status(), []) == ()  # never started: nothing billed


def test_prices_are_estimates_spot_prices_per_replica() -> None:
    prices = prices_of(SPEC, "us-central1")
    assert prices[0] == pytest.approx(prices[1]) and prices[0] is not None and 0 < prices[0] < 1


def test_managed_ids_are_told_from_job_ids() -> None:
    assert is_managed_id("m-20261206-225521-46f8")
    assert not is_managed_id("local-20261206-225521-6540") and not is_managed_id("1234567890")
