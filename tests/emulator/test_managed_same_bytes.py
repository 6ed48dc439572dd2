"""Issue 22: a managed Spot run of the bundled trainer that is preempted twice ends with the same model
bytes as an undisturbed run of the same template and seed (the trainer's resume is bitwise exact)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.emulator.test_managed_faults import faulty, run  # noqa: F401  (the fixture and the runner)
from vertexdist.managed import store as st

pytestmark = [pytest.mark.integration, pytest.mark.slow]

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


def test_preempted_twice_ends_with_the_same_model_bytes(
    faulty: Any,  # noqa: F811
    write_template: Any,
    tmp_path: Path,
) -> None:
    plain, managed = tmp_path / "plain-model", tmp_path / "managed-model"
    emu = faulty("- kind: preempt\n  replica: workerpool0-0\n  after: 4s\n  grace: 3s\n  times: 2\n")
    quiet = faulty("[]\n")
    args = "  args: ['{}']\n"
    p1 = write_template(TRAIN, name="same-bytes-plain", extra="")
    p1.write_text(p1.read_text().replace("  args: ['--epochs=1']\n", args.format(plain)))
    final, attempts = run(quiet, p1, tmp_path / "q")
    assert final.state == st.SUCCEEDED, final.why
    p2 = write_template(TRAIN, name="same-bytes-spot", extra="scheduling_strategy: SPOT\n")
    p2.write_text(p2.read_text().replace("  args: ['--epochs=1']\n", args.format(managed)))
    final, attempts = run(emu, p2, tmp_path / "m")
    assert final.state == st.SUCCEEDED, final.why
    assert [a.reason for a in attempts] == ["PREEMPTED", "PREEMPTED", "SUCCEEDED"]
    want, got = model_bytes(plain), model_bytes(managed)
    assert want and got == want
    logs = "".join(f.read_text() for f in (tmp_path / "emu0" / "jobs").rglob("workerpool*.log"))
    assert logs.count("resumed from") == 2  # each later attempt resumed from the SIGTERM checkpoint
