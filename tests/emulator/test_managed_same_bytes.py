"""Issue 22: a managed Spot run of the bundled trainer that is preempted twice ends with the same model
bytes as an undisturbed run of the same template and seed (the trainer's resume is bitwise exact)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.emulator.test_managed_faults import faulty, run  # noqa: F401  (the fixture and the runner)
from vertexdist.managed import store as st

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(480)]  # up to 3 aims, loaded

# The bundled trainer, run in-process with a tiny config; a fixed model folder per run (arg 1).
TRAIN = """\
import os, sys
from trainer_pkg.task import main
model = sys.argv[1]
raise SystemExit(main(["--epochs=6", "--samples=40000", "--batch-size=32", "--seed=7", "--device=cpu",
                       "--nproc-per-node=1", "--model-dir=" + model]))
"""


def model_bytes(folder: Path) -> dict[str, bytes]:
    """The saved model's files; metrics.jsonl is left out (it records wall-clock times)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "metrics.jsonl")
    return {str(p.relative_to(folder)): p.read_bytes() for p in files}


def chief_logs(emu_dir: Path) -> list[str]:
    """The chief's log of each job an emulator ran (an attempt each: the emulator is the run's own), in the
    order they were created."""
    jobs = sorted((emu_dir / "jobs").iterdir(), key=lambda folder: folder.stat().st_ctime_ns)
    return ["".join(log.read_text() for log in job.glob("logs/workerpool0-*.log")) for job in jobs]


def test_preempted_twice_ends_with_the_same_model_bytes(
    faulty: Any,  # noqa: F811
    write_template: Any,
    tmp_path: Path,
) -> None:
    plain, managed = tmp_path / "plain-model", tmp_path / "managed-model"
    quiet = faulty("[]\n")
    args = "  args: ['{}']\n"
    p1 = write_template(TRAIN, name="same-bytes-plain", extra="")
    p1.write_text(p1.read_text().replace("  args: ['--epochs=1']\n", args.format(plain)))
    final, attempts = run(quiet, p1, tmp_path / "q")
    assert final.state == st.SUCCEEDED, final.why
    (only,) = attempts
    assert only.started is not None and only.ended is not None
    # Aim each preemption at half an undisturbed attempt's time: past the trainer's start-up (torch's
    # import), before its end. The fault plan is time-based and 2 shared cores are not steady, so an aim
    # that missed training (too early: nothing to resume; too late: an attempt finished) is corrected.
    after = round((only.ended - only.started) / 2, 1)
    p2 = write_template(TRAIN, name="same-bytes-spot", extra="scheduling_strategy: SPOT\n")
    p2.write_text(p2.read_text().replace("  args: ['--epochs=1']\n", args.format(managed)))
    for aim in range(3):
        shutil.rmtree(managed, ignore_errors=True)
        plan = f"- kind: preempt\n  replica: workerpool0-0\n  after: {after}s\n  grace: 3s\n  times: 2\n"
        emu = faulty(plan)
        final, attempts = run(emu, p2, tmp_path / f"m{aim}")
        assert final.state == st.SUCCEEDED, final.why
        reasons = [a.reason for a in attempts]
        if reasons != ["PREEMPTED", "PREEMPTED", "SUCCEEDED"]:
            after = round(after * 0.6, 1)  # an attempt ended before its preemption
            continue
        assert emu.data_dir is not None
        logs = chief_logs(emu.data_dir)
        if all("stopping on request after step" in log for log in logs[:2]):
            break  # each preemption landed while the trainer trained: it checkpointed on SIGTERM
        after = round(after * 1.5, 1)  # a preemption landed before the trainer trained
    assert reasons == ["PREEMPTED", "PREEMPTED", "SUCCEEDED"], (reasons, after)
    # Each later attempt resumed from the SIGTERM checkpoint of the one before.
    assert ["resumed from" in log for log in logs] == [False, True, True], (after, logs[-1][-2000:])
    want, got = model_bytes(plain), model_bytes(managed)
    assert want and got == want
