"""The managed controller against the emulator's own capacity faults (`--fault-plan`): a preempted Spot
job, a stockout and a quota refusal, each read as Vertex reports it and recovered by a new attempt."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vertexdist.emulator import Emulator
from vertexdist.jobs.submit import Where
from vertexdist.managed import store as st
from vertexdist.managed.attempts import VertexAttempts
from vertexdist.managed.controller import Backoff, Controller
from vertexdist.spec.fault_plan import parse_fault_plan
from vertexdist.spec.loader import load_template

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Records each attempt's checkpoint folder, then works for 3 s (long enough to be preempted).
TRAIN = """\
import os, time
print("checkpoint dir", os.environ.get("AIP_CHECKPOINT_DIR"))
time.sleep(3)
"""


@pytest.fixture
def faulty(tmp_path: Path) -> Iterator[Any]:
    started: list[Emulator] = []

    def start(plan: str) -> Emulator:
        emu = Emulator(
            data_dir=tmp_path / f"emu{len(started)}", fault_plan=parse_fault_plan(plan, "plan.yaml")
        )
        emu.start()
        started.append(emu)
        return emu

    yield start
    for emu in started:
        emu.stop()


def run(emu: Emulator, path: Path, tmp_path: Path) -> tuple[st.Managed, list[st.Attempt]]:
    store = st.Store(tmp_path / "managed.sqlite")
    managed = store.create(str(path), "vertex", {})
    backend = VertexAttempts(
        Where(endpoint=emu.vertex_endpoint, transport="rest"),
        env={"STORAGE_EMULATOR_HOST": emu.storage_endpoint},
    )
    ctl = Controller(
        store, managed.id, load_template(path), backend, poll_s=0.2, backoff=Backoff(first_s=0.05, max_s=0.2)
    )
    return ctl.run(), store.attempts(managed.id)


def test_a_preempted_spot_job_is_tried_again_in_the_same_place_in_the_same_folder(
    faulty: Any, write_template: Any, tmp_path: Path
) -> None:
    emu = faulty("- kind: preempt\n  replica: workerpool0-0\n  after: 1s\n  grace: 1s\n")
    path = write_template(TRAIN, name="managed-preempt", extra="scheduling_strategy: SPOT\n")
    final, attempts = run(emu, path, tmp_path)
    assert final.state == st.SUCCEEDED
    assert [(a.reason, a.machine_type, a.scheduling_strategy) for a in attempts] == [
        ("PREEMPTED", "n1-standard-4", "SPOT"),
        ("SUCCEEDED", "n1-standard-4", "SPOT"),
    ]
    assert "was preempted" in (attempts[0].error or "")
    assert attempts[0].output_dir and attempts[1].output_dir == attempts[0].output_dir


def test_a_stockout_moves_to_the_fallback(faulty: Any, write_template: Any, tmp_path: Path) -> None:
    emu = faulty("- kind: stockout\n  machine_type: n1-standard-4\n  times: 5\n")
    extra = "recovery:\n  fallback:\n    - machine_type: n1-standard-8\n"
    final, attempts = run(emu, write_template(TRAIN, name="managed-stockout", extra=extra), tmp_path)
    assert final.state == st.SUCCEEDED
    assert [(a.reason, a.machine_type) for a in attempts] == [
        ("STOCKOUT", "n1-standard-4"),
        ("SUCCEEDED", "n1-standard-8"),
    ]


def test_a_quota_refusal_past_max_preemptions_stops(faulty: Any, write_template: Any, tmp_path: Path) -> None:
    emu = faulty("- kind: quota\n  times: 5\n")
    extra = "recovery:\n  max_preemptions: 1\n"
    final, attempts = run(emu, write_template(TRAIN, name="managed-quota-plan", extra=extra), tmp_path)
    assert final.state == st.FAILED and "max_preemptions is 1" in final.why
    assert [a.reason for a in attempts] == ["QUOTA", "QUOTA"]
    assert all(a.job is None for a in attempts)
