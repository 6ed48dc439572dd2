"""`make holdout`'s check (tests/stress/holdout.py): a run folder is passed only with every rank's stacks in
its replica's log and in the run folder, the culprit's with its blocked frame, and a verdict naming it."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

VERDICT = (
    "hung: no progress for 7s; rank 3 (workerpool1-0, local rank 1) is in fetch_shard (user_script.py:7)"
)
FRAME = '  File "user_script.py", line 7, in fetch_shard\n'


def _holdout() -> ModuleType:
    spec = importlib.util.spec_from_file_location("holdout", Path(__file__).with_name("holdout.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["holdout"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _run(tmp_path: Path, left_out: int | None = None) -> tuple[Path, str]:
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "health" / "stacks").mkdir(parents=True)
    for replica in range(2):
        text = ""
        for rank in (2 * replica, 2 * replica + 1):
            if rank == left_out:
                continue
            frame = FRAME if rank == 3 else "  in all_reduce\n"
            text += (
                f"vertexdist_launcher: stacks of rank {rank} (workerpool{replica}-0, local rank {rank % 2})\n"
            )
            text += frame
            (run / "health" / "stacks" / f"rank-{rank}.txt").write_text(frame)
            (run / "health" / "stacks" / f"rank-{rank}.dumped").write_text(VERDICT)
        (run / "logs" / f"workerpool{replica}-0.log").write_text(text)
    summary = {"state": "JOB_STATE_FAILED", "error": {"message": VERDICT}}
    return run, "local-run output\n" + json.dumps(summary) + "\n"


def test_a_run_with_every_ranks_stacks_passes(tmp_path: Path) -> None:
    run, stdout = _run(tmp_path)
    assert _holdout().problems_of(run, stdout, 1) == []


def test_a_rank_that_left_no_dump_is_named_in_the_log_and_the_run_folder(tmp_path: Path) -> None:
    run, stdout = _run(tmp_path, left_out=2)
    assert _holdout().problems_of(run, stdout, 1) == [
        "rank 2: no stacks in workerpool1-0.log",
        "rank 2: no health/stacks/rank-2.txt",
        "rank 2: no health/stacks/rank-2.dumped",
    ]


def test_a_job_that_did_not_end_hung_fails_the_run(tmp_path: Path) -> None:
    run, _ = _run(tmp_path)
    problems = _holdout().problems_of(run, json.dumps({"state": "JOB_STATE_SUCCEEDED"}), 0)
    assert problems and problems[0].startswith("not ended as a hang")
