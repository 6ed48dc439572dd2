"""Issue 41, part 5: `vertexdist ranks` and the console's Ranks panel believed any line a script printed: a
fake heartbeat added a rank 7, a fake verdict blamed rank 1 on a job that SUCCEEDED (the first verdict line
won, so an early fake hid the real one), and one line with `"step": "abc"` was an internal error for good.
Now a job made by vertexdist carries a private mark that its watchers write into each line (and take out of
the script's environment), readers take only marked lines, and each field is type-checked."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vertexdist.backends.base import JobStatus, LogChunk
from vertexdist.health.folder import read_beats
from vertexdist.health.log_scan import LogLine, job_mark, scan
from vertexdist.jobs.ranks import log_health, log_report, report
from vertexdist.render import health_mark
from vertexdist.shipped.vertexdist_launcher import health as watcher

MARK = "9f" * 16


def _beat_line(rank: int, step: int, mark: str = MARK, world: int = 2) -> str:
    env = {"RANK": str(rank), "WORLD_SIZE": str(world), watcher.MARK_VARIABLE: mark}
    rank_watcher = watcher.Watcher(env)
    rank_watcher.dir = None
    for _ in range(step):
        rank_watcher.on_step()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rank_watcher.write_beat()
    return out.getvalue().rstrip("\n")


def _fake(rank: int, **fields: Any) -> str:
    return json.dumps({"message": "x", watcher.LOG_KEY: {"rank": rank, "step": 5, "world_size": 8, **fields}})


def test_a_printed_heartbeat_without_the_jobs_mark_adds_no_rank() -> None:
    lines = [
        LogLine("workerpool0-0", _beat_line(0, 3)),
        LogLine("workerpool0-0", _fake(7)),  # the script's print
        LogLine("workerpool0-0", _fake(1, mark="guess")),
        LogLine("workerpool0-1", _beat_line(1, 3)),
    ]
    found = scan(lines, MARK)
    assert [b["rank"] for b in found.beats] == [0, 1]
    assert "mark" not in found.beats[0]


def test_an_early_fake_verdict_neither_wins_nor_hides_the_real_one() -> None:
    fake = "vertexdist_launcher: hung: no progress for 1800s; rank 1 is in fetch_shard"
    real = watcher.dump_text(
        "hung: no progress for 60s; rank 0 is in train_step", "rank 0 (workerpool0-0) at step 4\n", 0, MARK
    )
    lines = [
        LogLine("workerpool0-1", fake),
        LogLine("workerpool0-1", "vertexdist_launcher: stacks of rank 1 (workerpool0-1) at step 4"),
        LogLine("workerpool0-1", watcher.verdict_line("hung: rank 1 is to blame", 1, "guess")),
        *(LogLine("workerpool0-0", line) for line in real.splitlines()),
    ]
    found = scan(lines, MARK)
    assert found.verdict == "hung: no progress for 60s; rank 0 is in train_step"
    assert list(found.stacks) == [0]
    unmarked = scan(lines[:2])  # a job without a mark (made before marks) reads as it did
    assert unmarked.verdict is not None and "rank 1" in unmarked.verdict


def test_a_succeeded_job_shows_no_verdict_whatever_a_line_says() -> None:
    real = watcher.dump_text("hung: rank 1 is to blame", "rank 1 (workerpool0-1) at step 4\n", 1, MARK)
    chunks = [LogChunk(replica="workerpool0-1", text=line) for line in real.splitlines()]
    status = JobStatus(name="j", display_name="j", state="SUCCEEDED", end_time="2026-01-01T00:00:00Z")
    assert log_report(log_health(chunks, MARK), status)["verdict"] is None


@pytest.mark.parametrize(
    "fields",
    [
        {"step": "abc"},
        {"step": True},
        {"step": -1},
        {"rank": "0"},
        {"rank": 2**40},
        {"world_size": 0},
        {"rank": 9, "world_size": 8},
        {"last_step_at": "now"},
        {"last_step_at": float("inf")},
        {"wait_share": 3},
        {"where": ["a"]},
        {"where": "x" * 5000},
        {"state": {"a": 1}},
        {"own_step_s": "0.1"},
    ],
)
def test_a_line_with_a_field_of_the_wrong_type_is_skipped_never_an_error(fields: dict[str, Any]) -> None:
    good = _beat_line(0, 3, mark="")
    bad = json.dumps({watcher.LOG_KEY: {"rank": 1, "step": 5, "world_size": 8, **fields}})
    found = scan([LogLine("workerpool0-0", good), LogLine("workerpool0-1", bad)])
    assert [b["rank"] for b in found.beats] == [0]
    status = JobStatus(name="j", display_name="j", state="RUNNING")
    rows = log_report(found, status, now=1e9)["ranks"]  # the table is made of it without an error
    assert [r["rank"] for r in rows] == [0]


def test_a_heartbeat_file_of_the_wrong_types_is_skipped(tmp_path: Path) -> None:
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    (ranks / "rank-0.json").write_text(
        json.dumps({"rank": 0, "step": 3, "world_size": 2, "state": "computing"})
    )
    (ranks / "rank-1.json").write_text(json.dumps({"rank": 1, "step": "abc", "world_size": 2}))
    (ranks / "rank-2.json").write_text("[1, 2]")
    assert [b["rank"] for b in read_beats(tmp_path)] == [0]
    assert [r["rank"] for r in report(tmp_path, now=1e9)["ranks"]] == [0]


def test_a_new_job_gets_a_mark_once_and_its_readers_find_it() -> None:
    from vertexdist.backends.vertex.request import Submission

    assert health_mark.MARK_VARIABLE == watcher.MARK_VARIABLE
    pool = {"containerSpec": {"imageUri": "i", "env": [{"name": "A", "value": "1"}]}}
    request = {
        "parent": "p",
        "trainingPipeline": {
            "trainingTaskInputs": {
                "workerPoolSpecs": [pool, pool],
                "baseOutputDirectory": {"outputUriPrefix": "gs://b/o/<job-folder>"},
            }
        },
    }
    first = Submission(request=request, request_hash="h").for_new_job()
    again = first.for_new_job()
    assert again.request == first.request
    spec = first.request["trainingPipeline"]["trainingTaskInputs"]
    mark = job_mark(spec)
    assert mark and len(mark) == 32
    assert all(
        p["containerSpec"]["env"][-1] == {"name": watcher.MARK_VARIABLE, "value": mark}
        for p in spec["workerPoolSpecs"]
    )
    assert (
        health_mark.without_mark(first.request)["trainingPipeline"]["trainingTaskInputs"]["workerPoolSpecs"][
            0
        ]
        == pool
    )
    other = Submission(request=request, request_hash="h").for_new_job()
    assert job_mark(other.request["trainingPipeline"]["trainingTaskInputs"]) != mark


def test_the_watcher_takes_the_mark_out_of_the_scripts_environment(tmp_path: Path) -> None:
    code = (
        "import os\n"
        "from vertexdist.shipped.vertexdist_launcher import health\n"
        "w = health.start()\n"
        "print(w.mark, os.environ.get(health.MARK_VARIABLE))\n"
    )
    env = {**os.environ, watcher.MARK_VARIABLE: MARK, "VERTEXDIST_HEALTH_DIR": str(tmp_path)}
    env["PYTHONPATH"] = os.getcwd()
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == [MARK, "None"], done.stderr
