"""Issue 22: a managed Spot run of the bundled trainer that is preempted twice ends with the same model
bytes as an undisturbed run of the same template and seed (the trainer's resume is bitwise exact)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.emulator.test_managed_faults import faulty, run  # noqa: F401  (the fixture and the runner)
from vertexdist.managed import store as st

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

# The bundled trainer, run in-process with a tiny config: 126 steps (2,000 samples, 32 a step, 2 epochs); a
# fixed model folder per run (arg 1); one thread, as the 2 shared cores of CI give.
TRAIN = """\
import sys
from trainer_pkg.task import main
raise SystemExit(main(["--epochs=2", "--samples=2000", "--batch-size=32", "--seed=7", "--device=cpu",
                       "--nproc-per-node=1", "--model-dir=" + sys.argv[1]]))
"""
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
AIM = 25  # each attempt is preempted at its 25th step


def model_bytes(folder: Path) -> dict[str, bytes]:
    """The saved model's files; metrics.jsonl is left out (it records wall-clock times)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "metrics.jsonl")
    return {str(p.relative_to(folder)): p.read_bytes() for p in files}


def chief_logs(emu_dir: Path) -> list[str]:
    """The chief's log of each job an emulator ran (an attempt each), in the order they were created."""
    jobs = sorted((emu_dir / "jobs").iterdir(), key=lambda folder: folder.stat().st_ctime_ns)
    return ["".join(log.read_text() for log in job.glob("logs/workerpool0-*.log")) for job in jobs]


def test_preempted_twice_ends_with_the_same_model_bytes(
    faulty: Any,  # noqa: F811
    write_template: Any,
    tmp_path: Path,
) -> None:
    plain, managed = tmp_path / "plain-model", tmp_path / "managed-model"
    args = "  args: ['{}']\n"
    # Aimed at a step, not a time: each preempted attempt is held at its 25th step until the SIGTERM, which
    # the trainer answers as on Vertex (it saves at its next stop check and exits; the grace is a bound).
    # The plan's two preemptions go to the managed job's first two attempts; the undisturbed run comes after.
    emu = faulty(
        f"- kind: preempt\n  replica: workerpool0-0\n  after_step: {AIM}\n  grace: 60s\n  times: 2\n"
    )
    p2 = write_template(TRAIN, name="same-bytes-spot", env=ONE_THREAD, extra="scheduling_strategy: SPOT\n")
    p2.write_text(p2.read_text().replace("  args: ['--epochs=1']\n", args.format(managed)))
    final, attempts = run(emu, p2, tmp_path / "m")
    assert final.state == st.SUCCEEDED, final.why
    assert [a.reason for a in attempts] == ["PREEMPTED", "PREEMPTED", "SUCCEEDED"]
    p1 = write_template(TRAIN, name="same-bytes-plain", env=ONE_THREAD)
    p1.write_text(p1.read_text().replace("  args: ['--epochs=1']\n", args.format(plain)))
    final, _ = run(emu, p1, tmp_path / "q")
    assert final.state == st.SUCCEEDED, final.why
    assert emu.data_dir is not None
    logs = chief_logs(emu.data_dir)
    assert len(logs) == 4
    stopped = [re.findall(r"^stopping on request after step (\d+);", log, re.M) for log in logs]
    resumed = [re.findall(r"^resumed from .* step (\d+)$", log, re.M) for log in logs]
    # Each later attempt resumed from the SIGTERM checkpoint of the one before, saved at or after its aim.
    assert stopped[2:] == [[], []] and resumed == [[], stopped[0], stopped[1], []], (stopped, resumed)
    first, second = int(stopped[0][0]), int(stopped[1][0])
    assert first >= AIM and second >= first + AIM, (first, second)
    want, got = model_bytes(plain), model_bytes(managed)
    assert want and got == want
