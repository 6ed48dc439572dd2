"""A hung job's dumps before teardown, on the local side: the monitor (and through it the runner) waits for
every rank's stacks before anything is stopped, and names a rank that left none; `ranks --stacks` says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vertexdist.backends.base import JobError
from vertexdist.cli.ranks import missing_stacks
from vertexdist.local.health_monitor import HealthMonitor
from vertexdist.shipped.vertexdist_launcher import health


class Job:
    done = False

    def __init__(self) -> None:
        self.notes: list[str] = []

    def impose_failure(self, error: JobError, *, stop: bool = False) -> None:
        pass

    def note(self, message: str) -> None:
        self.notes.append(message)


def _beat(folder: Path, rank: int, replica: str, local_rank: int) -> None:
    (folder / "ranks").mkdir(parents=True, exist_ok=True)
    beat = {"rank": rank, "replica": replica, "local_rank": local_rank, "world_size": 2, "step": 5}
    (folder / "ranks" / f"rank-{rank}.json").write_text(json.dumps(beat))


def test_the_monitor_waits_for_the_dumps_and_names_a_rank_that_left_none(tmp_path: Path) -> None:
    job = Job()
    monitor = HealthMonitor(job, tmp_path)
    assert monitor.await_dumps(0.0) == [] and job.notes == []  # not hung: nothing to wait for
    _beat(tmp_path, 0, "workerpool0-0", 0)
    _beat(tmp_path, 1, "workerpool0-0", 1)
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / health.dumped_marker(0)).write_text("")
    monitor.verdict = "hung: rank 1 is in fetch_shard"
    assert monitor.await_dumps(0.0) == [1]
    assert monitor.await_dumps(0.0) == [1] and len(job.notes) == 1  # said once
    assert job.notes[0].startswith("rank 1 (workerpool0-0, local rank 1) left no stacks within 0s")
    monitor.write_summary()
    assert json.loads((tmp_path / "summary.json").read_text())["no_stacks"] == [1]


def test_the_monitor_returns_as_soon_as_every_rank_has_dumped(tmp_path: Path) -> None:
    job = Job()
    monitor = HealthMonitor(job, tmp_path)
    _beat(tmp_path, 0, "workerpool0-0", 0)
    _beat(tmp_path, 1, "workerpool1-0", 0)
    (tmp_path / "stacks").mkdir()
    for rank in (0, 1):
        (tmp_path / "stacks" / health.dumped_marker(rank)).write_text("")
    monitor.verdict = "hung"
    assert monitor.await_dumps(600.0) == [] and job.notes == []


def test_ranks_stacks_names_each_rank_without_a_dump() -> None:
    rows = {"ranks": [{"rank": 0}, {"rank": 1}, {"rank": 2}], "verdict": "hung: ..."}
    assert missing_stacks({0: "...", 2: "..."}, rows) == [1]
    assert missing_stacks({}, rows) == [0, 1, 2]  # hung, and no dump at all
    assert missing_stacks({}, {**rows, "verdict": None}) == []  # a job that ended well has no dumps


def test_ranks_stacks_prints_a_line_in_place_of_each_missing_dump(capsys: pytest.CaptureFixture[str]) -> None:
    from vertexdist.cli.ranks import _print_stacks

    _print_stacks({0: "rank 0 at step 5\nThread MainThread\n"}, [1], live=False, as_json=False)
    out = capsys.readouterr().out
    assert "===== rank 0 =====\nrank 0 at step 5" in out
    assert "===== rank 1 =====\nno stacks of rank 1: it left no dump" in out
    _print_stacks({}, [0], live=True, as_json=True)
    assert json.loads(capsys.readouterr().out) == {"stacks": {}, "no_stacks": [0]}
