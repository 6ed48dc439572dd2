"""The goodput ledger of an emulator managed job: a script that marks its steps (`health.step()`) and times
its saves (`health.checkpoint()`), preempted twice at a known step by a fault plan's `after_step`; the ledger
read through the emulator (its jobs' resources and heartbeat files) counts exactly the lost steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.emulator.test_managed_faults import faulty  # noqa: F401  (the fixture)
from vertexdist.goodput.ledger import CATEGORIES, compute
from vertexdist.jobs.goodput import managed_input
from vertexdist.jobs.submit import Where
from vertexdist.jobs.where import JobPlace
from vertexdist.managed import store as st
from vertexdist.managed.attempts import VertexAttempts
from vertexdist.managed.controller import Backoff, Controller
from vertexdist.spec.loader import load_template

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

SHIPPED = Path(__file__).resolve().parents[2] / "vertexdist" / "shipped"
# 20 steps, a checkpoint every 5 (a file beside the test), resumed from it; no torch.
TRAIN = """\
import os, sys, time
sys.path.insert(0, {shipped!r})
from vertexdist_launcher import health
health.start()
path = {checkpoint!r}
start = int(open(path).read()) if os.path.exists(path) else 0
for step in range(start + 1, 21):
    time.sleep(0.02)
    health.step()
    if step % 5 == 0:
        with health.checkpoint():
            with open(path + ".tmp", "w") as handle:
                handle.write(str(step))
            os.replace(path + ".tmp", path)
"""


def test_an_emulator_managed_job_preempted_twice_at_step_7_recomputes_2_steps_each_time(
    faulty: Any,  # noqa: F811
    write_template: Any,
    tmp_path: Path,
) -> None:
    emu = faulty("- kind: preempt\n  replica: workerpool0-0\n  after_step: 7\n  grace: 1s\n  times: 2\n")
    script = TRAIN.format(shipped=str(SHIPPED), checkpoint=str(tmp_path / "step.txt"))
    path = write_template(script, name="goodput-emulator", extra="scheduling_strategy: SPOT\n")
    store = st.Store(tmp_path / "managed.sqlite")
    managed = store.create(str(path), "vertex", {})
    backend = VertexAttempts(
        Where(endpoint=emu.vertex_endpoint, transport="rest"),
        env={"STORAGE_EMULATOR_HOST": emu.storage_endpoint},
    )
    controller = Controller(
        store, managed.id, load_template(path), backend, poll_s=0.2, backoff=Backoff(first_s=0.05, max_s=0.2)
    )
    assert controller.run().state == st.SUCCEEDED
    place = JobPlace(emulator_dir=emu.data_dir, endpoint=emu.vertex_endpoint, transport="rest")
    ledger = compute(managed_input(store, managed.id, place))
    shown = ledger.to_json()
    assert [a["reason"] for a in shown["attempts"]] == ["PREEMPTED", "PREEMPTED", "SUCCEEDED"]
    # Each attempt made 7 steps after resuming, its last save 2 steps before: steps 5, 10, then 20.
    assert [(a["steps"], a["checkpoint_step"], a["recomputed_steps"]) for a in shown["attempts"]] == [
        (7, 5, 2),
        (7, 5, 2),
        (10, 10, 0),
    ]
    assert shown["steps"] == {"final": 20, "recomputed": 4}
    billed = ledger.billed_s
    assert billed > 0 and abs(sum(ledger.categories[c] for c in CATEGORIES) - billed) <= 0.01 * billed
    assert ledger.categories["recomputed"] > 0 and ledger.categories["checkpoint"] > 0
    price = shown["price_per_replica_hour"]["workerpool0"]
    assert price is not None
    for name in CATEGORIES:
        assert shown["dollars"][name] == pytest.approx(ledger.categories[name] * price / 3600, abs=1e-4)
