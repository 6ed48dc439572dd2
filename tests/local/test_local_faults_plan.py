"""`LocalFaults` before a local job is made: the Flex-start wait, and the plans it takes."""

from __future__ import annotations

from vertexdist.jobs.local_faults import LocalFaults
from vertexdist.spec.fault_plan import parse_fault_plan

FLEX = {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1}]}


def _flex(max_wait: str | None) -> dict[str, object]:
    scheduling: dict[str, object] = {"strategy": "FLEX_START"}
    if max_wait is not None:
        scheduling["maxWaitDuration"] = max_wait
    return {**FLEX, "scheduling": scheduling}


def test_flex_wait_waits_then_lets_the_job_start() -> None:
    waited: list[float] = []
    faults = LocalFaults(parse_fault_plan("- kind: flex_wait\n  wait: 20s\n"), sleep=waited.append)
    assert faults.before_create("us-central1", _flex("60s"), "job") is None
    assert waited == [20.0]


def test_flex_wait_past_max_wait_fails_with_the_max_wait_duration_error() -> None:
    waited: list[float] = []
    faults = LocalFaults(parse_fault_plan("- kind: flex_wait\n  wait: never\n"), sleep=waited.append)
    failure = faults.before_create("us-central1", _flex("30s"), "job")
    assert failure is not None and failure.code == 8
    assert "max_wait_duration (30s)" in failure.message
    assert waited == [30.0]


def test_flex_wait_leaves_a_standard_job_alone() -> None:
    waited: list[float] = []
    faults = LocalFaults(parse_fault_plan("- kind: flex_wait\n  wait: 20s\n"), sleep=waited.append)
    assert faults.before_create("us-central1", FLEX, "job") is None
    assert waited == []


def test_a_plan_with_worker_restarts_and_maintenance_is_taken() -> None:
    plan = parse_fault_plan("- kind: maintenance\n- kind: preempt\n  outcome: worker_restarts\n", "f.yaml")
    assert LocalFaults(plan).capacity.plan is plan
