"""Fault plan files: every kind with its fields, and bad input named by entry, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertexdist.spec.fault_plan import (
    GCE_PREEMPTION_GRACE_S,
    FaultPlanError,
    FlexWaitFault,
    HangFault,
    MaintenanceFault,
    PreemptFault,
    QuotaFault,
    ScatteredStartFault,
    SlowFault,
    StockoutFault,
    load_fault_plan,
    parse_fault_plan,
)

PLAN = """\
- kind: preempt
  replica: workerpool1-0
  after: 6s
  grace: 2s
  times: 2
  outcome: worker_restarts
- kind: stockout
  location: us-central1
  machine_type: a2-highgpu-4g
  times: 100
- kind: quota
- kind: maintenance
  replica: workerpool1-0
  after: 10s
- kind: flex_wait
  wait: 20s
- kind: flex_wait
  wait: never
"""


def test_every_kind_reads_with_its_fields(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(PLAN)
    faults = load_fault_plan(path).faults
    assert faults[0] == PreemptFault(
        replica="workerpool1-0", after=6.0, grace=2.0, times=2, outcome="worker_restarts"
    )
    assert faults[1] == StockoutFault(location="us-central1", machine_type="a2-highgpu-4g", times=100)
    assert faults[2] == QuotaFault()
    assert faults[3] == MaintenanceFault(replica="workerpool1-0", after=10.0)
    assert faults[4] == FlexWaitFault(wait=20.0)
    assert faults[5] == FlexWaitFault.model_validate({"wait": "never"})
    assert faults[5].wait is None


def test_defaults_are_gce_grace_the_primary_and_the_conservative_outcome() -> None:
    (fault,) = parse_fault_plan("- kind: preempt\n").faults
    assert isinstance(fault, PreemptFault)
    assert (fault.replica, fault.after, fault.grace, fault.times) == (
        "workerpool0-0",
        0.0,
        GCE_PREEMPTION_GRACE_S,
        1,
    )
    assert fault.outcome == "job_fails"


def test_an_empty_plan_has_no_faults() -> None:
    assert parse_fault_plan("").faults == ()
    assert parse_fault_plan("[]").faults == ()


def _problems(text: str) -> list[str]:
    with pytest.raises(FaultPlanError) as caught:
        parse_fault_plan(text, "plan.yaml")
    return [f"{p.one_line()} | {p.hint}" for p in caught.value.problems]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- kind: preempt\n- kind: stockot\n", "plan.yaml:2:9: entry 1.kind: kind 'stockot' is not one of"),
        (
            "- kind: preempt\n  after: soon\n",
            "plan.yaml:2:10: entry 0 (preempt).after: 'soon' is not a duration",
        ),
        ("- kind: preempt\n  grace: -2s\n", "plan.yaml:2:10: entry 0 (preempt).grace:"),
        (
            "- kind: preempt\n  replica: worker1\n",
            "plan.yaml:2:12: entry 0 (preempt).replica: 'worker1' is not a replica",
        ),
        (
            "- kind: preempt\n  outcome: explode\n",
            "plan.yaml:2:12: entry 0 (preempt).outcome: 'explode' is not one of",
        ),
        (
            "- kind: quota\n  tims: 1\n",
            "plan.yaml:2:3: entry 0 (quota).tims: unknown field 'tims' | did you mean 'times'?",
        ),
        ("- kind: quota\n  times: 0\n", "plan.yaml:2:10: entry 0 (quota).times:"),
        (
            "- kind: quota\n  location: us-centrl1\n",
            "plan.yaml:2:13: entry 0 (quota).location: 'us-centrl1' is not",
        ),
        ("- kind: stockout\n  machine_type: a9-huge\n", "plan.yaml:2:17: entry 0 (stockout).machine_type:"),
        ("- kind: flex_wait\n", "plan.yaml:1:3: entry 0 (flex_wait).wait: required field 'wait' is missing"),
        ("- replica: workerpool0-0\n", "plan.yaml:1:3: entry 0.kind: no `kind`"),
        ("- preempt\n", "plan.yaml:1:3: entry 0: each entry must be a mapping"),
        ("kind: preempt\n", "plan.yaml:1:1: a fault plan is a YAML list of faults"),
        ("- kind: [\n", "plan.yaml:"),
    ],
)
def test_bad_input_is_one_clear_error_naming_the_entry(text: str, expected: str) -> None:
    problems = _problems(text)
    assert any(p.startswith(expected) for p in problems), problems


def test_every_bad_entry_is_reported_at_once() -> None:
    problems = _problems("- kind: preempt\n  after: x\n- kind: quota\n  tims: 2\n")
    assert [p.split(":")[1] for p in problems] == ["2", "4"]


def test_an_unreadable_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FaultPlanError, match="cannot read the fault plan"):
        load_fault_plan(tmp_path / "missing.yaml")


def test_two_mistakes_in_one_entry_are_both_reported_with_hints() -> None:
    with pytest.raises(FaultPlanError) as caught:
        parse_fault_plan("- kind: stockot\n  tims: 2\n", "plan.yaml")
    problems = caught.value.problems
    assert [p.path for p in problems] == ["entry 0.kind", "entry 0.tims"]
    assert problems[1].hint == "did you mean 'times'?"
    message = caught.value.message
    assert "more)" not in message
    assert "plan.yaml:1:9: entry 0.kind" in message and "plan.yaml:2:3: entry 0.tims" in message
    assert "hint: did you mean 'stockout'?" in message and "hint: did you mean 'times'?" in message


def test_hang_slow_and_scattered_start_read_as_the_watchers_and_runner_take_them() -> None:
    plan = parse_fault_plan(
        "- kind: hang\n  replica: workerpool1-0\n  local_rank: 1\n  after_step: 5\n"
        "- kind: slow\n  delay: 0.2s\n"
        "- kind: scattered_start\n  max_delay: 2m\n  seed: 7\n"
    )
    hang, slow, scattered = plan.faults
    assert isinstance(hang, HangFault) and isinstance(slow, SlowFault)
    assert isinstance(scattered, ScatteredStartFault)
    assert hang.to_worker() == {
        "kind": "hang",
        "replica": "workerpool1-0",
        "local_rank": 1,
        "after_step": 5,
        "after": None,
    }
    assert slow.to_worker()["delay"] == 0.2
    delays = scattered.delays(["workerpool0-0", "workerpool1-0", "workerpool1-1"])
    assert delays == scattered.delays(["workerpool1-1", "workerpool1-0", "workerpool0-0"])
    assert all(0 <= d <= 120 for d in delays.values()) and len(set(delays.values())) == 3
    with pytest.raises(FaultPlanError, match="after_step` or `after`, not both"):
        parse_fault_plan("- kind: hang\n  after_step: 3\n  after: 10s\n")


def test_preempt_and_maintenance_take_after_step_as_hang_does() -> None:
    plan = parse_fault_plan(
        "- kind: preempt\n  after_step: 70\n  grace: 1s\n- kind: maintenance\n  replica: workerpool1-0\n"
        "  after_step: 5\n"
    )
    assert [getattr(f, "after_step", None) for f in plan.faults] == [70, 5]
    with pytest.raises(FaultPlanError, match="give `after_step` or `after`, not both"):
        parse_fault_plan("- kind: preempt\n  after_step: 70\n  after: 6s\n")
