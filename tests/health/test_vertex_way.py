"""Rank health the way Vertex runs it, as the emulator now runs it too (issue 42 part 6): the watcher's
heartbeat lines beside its files, each rank's own verdict read against every rank's last heartbeat so that
it names the culprit, and the emulator's monitor taking up that verdict instead of deciding one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vertexdist.backends.base import JobError, JobStatus
from vertexdist.health.log_scan import LogLine, scan
from vertexdist.health.verdict import blamed
from vertexdist.jobs.ranks import log_report
from vertexdist.local.health_monitor import HealthMonitor
from vertexdist.shipped.vertexdist_launcher import health

OWN = "hung: no progress for 6s; rank {} is in <module> (train.py:9) at step 5"


def beat(rank: int, state: str, step: int = 5) -> dict[str, Any]:
    where = "<module> (train.py:10)" if state != "waiting" else "<module> (train.py:9)"
    return {
        "rank": rank,
        "replica": f"workerpool{rank // 2}-0",
        "local_rank": rank % 2,
        "world_size": 4,
        "step": step,
        "first_step_at": 900.0,
        "last_step_at": 990.0,
        "state": state,
        "where": where,
        "what": "the all-reduce of backward" if state == "waiting" else "",
        "at": "train.py:9" if state == "waiting" else "train.py:10",
    }


HUNG = [beat(0, "waiting"), beat(1, "waiting"), beat(2, "waiting"), beat(3, "loading")]


def test_a_waiting_ranks_own_verdict_names_the_culprit_instead() -> None:
    text = blamed(OWN.format(0), HUNG)
    assert text == (
        "hung: no progress for 6s; rank 3 (workerpool1-0, local rank 1) is in <module> (train.py:10)"
        " at step 6; ranks 0-2 wait in the all-reduce of backward (train.py:9)"
    )
    assert blamed(OWN.format(3), HUNG) == text  # the culprit's own verdict reads the same


def test_a_verdict_stays_as_its_rank_wrote_it_where_the_heartbeats_show_no_other_culprit() -> None:
    computing = [beat(0, "computing"), beat(1, "computing")]
    assert blamed(OWN.format(1), computing) == OWN.format(1)  # rank 1 waits for no one: its word stands
    assert blamed(OWN.format(1), []) == OWN.format(1)  # no heartbeats to read it against
    everyone_waits = [beat(r, "waiting") for r in range(4)]
    assert blamed(OWN.format(2), everyone_waits) == OWN.format(2)  # no one to name instead
    assert blamed("hung: the monitor's own words", HUNG) == "hung: the monitor's own words"


def test_ranks_from_the_logs_names_the_culprit_whichever_rank_decided_first() -> None:
    lines = [LogLine(b["replica"], health.log_line(b, "m")) for b in HUNG]
    lines.append(LogLine("workerpool0-0", health.verdict_line(OWN.format(1), 1, "m")))
    status = JobStatus(name="j", display_name="j", state="FAILED", error="replica exited with 124")
    found = log_report(scan(lines, "m"), status, now=1000.0)
    assert [r["rank"] for r in found["ranks"]] == [0, 1, 2, 3]
    assert "; rank 3 (workerpool1-0, local rank 1) is in " in found["verdict"], found["verdict"]


def test_the_watcher_writes_both_its_file_and_lines_where_logs_is_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {
        health.DIR_VARIABLE: str(tmp_path),
        health.LOGS_VARIABLE: "1",
        health.MARK_VARIABLE: "m",
        "RANK": "3",
        "WORLD_SIZE": "4",
    }
    rank = health.Watcher(env)
    rank.write_beat()
    assert capsys.readouterr().out == ""  # no step yet: no line, as on Vertex
    rank.on_step()
    rank.write_beat(line=False)  # the file's pace
    assert capsys.readouterr().out == ""
    assert json.loads((tmp_path / "ranks" / "rank-3.json").read_text())["step"] == 1
    rank.write_beat()
    assert health.parse_log_line(capsys.readouterr().out.strip(), "m")["step"] == 1  # type: ignore[index]
    rank.dump("hung: no progress for 6s; rank 3 is in f")
    out = capsys.readouterr().out.strip().splitlines()
    assert health.parse_log_line(out[-1], "m")["rank"] == 3  # type: ignore[index]  # the last beat, a line
    assert (tmp_path / "stacks" / health.dumped_marker(3)).read_text().startswith("hung: no progress")

    local = health.Watcher({health.DIR_VARIABLE: str(tmp_path), "RANK": "2"})  # a local run: files only
    local.on_step()
    local.write_beat()
    assert not local.logs and capsys.readouterr().out == ""


class Job:
    done = False

    def __init__(self) -> None:
        self.errors: list[tuple[str, bool]] = []
        self.notes: list[str] = []

    def impose_failure(self, error: JobError, *, stop: bool = False) -> None:
        self.errors.append((error.message, stop))

    def note(self, message: str) -> None:
        self.notes.append(message)


def test_the_emulators_monitor_takes_up_the_first_ranks_verdict_and_decides_none_itself(
    tmp_path: Path,
) -> None:
    (tmp_path / "ranks").mkdir()
    for b in HUNG:
        (tmp_path / "ranks" / f"rank-{b['rank']}.json").write_text(json.dumps(b))
    job = Job()
    monitor = HealthMonitor(job, tmp_path, ranks_decide=True, clock=lambda: 1e4)  # 9,000 s after a step
    assert monitor.check() is None and monitor.take_up_verdict() is False and job.errors == []
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / health.dumped_marker(1)).write_text(OWN.format(1))
    assert monitor.take_up_verdict() is True
    [(error, stop)] = job.errors
    assert error.startswith("hung: no progress for 6s; rank 3 (workerpool1-0, local rank 1)") and not stop
    assert json.loads((tmp_path / "verdict.json").read_text())["verdict"] == error  # the launchers read it
    assert monitor.take_up_verdict() is True and len(job.errors) == 1  # taken up once

    files = HealthMonitor(Job(), tmp_path)  # a local run's monitor decides; it takes up nothing
    assert files.take_up_verdict() is False
