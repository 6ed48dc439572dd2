"""The views: log tailing, the live table, and the failure summary."""

from __future__ import annotations

import io
import queue
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from vertexdist.cli.local_live import LiveView
from vertexdist.cli.local_report import summary_lines
from vertexdist.cli.local_view import PrefixedView, View
from vertexdist.jobs.local_run import follow_local
from vertexdist.local import JobContext, JobEvent, JobState, start_job
from vertexdist.log_files import LogFollower, last_lines


def test_follower_returns_only_complete_new_lines(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    follower = LogFollower()
    assert follower.poll({"a": log}) == []  # not created yet
    log.write_bytes(b"one\ntw")
    assert follower.poll({"a": log}) == [("a", "one")]
    with open(log, "ab") as handle:
        handle.write(b"o\r\nthree")
    assert follower.poll({"a": log}) == [("a", "two")]
    assert follower.poll({"a": log}) == []
    assert follower.flush() == [("a", "three")]


def test_prefixed_view_aligns_names(tmp_path: Path) -> None:
    out = io.StringIO()
    view = PrefixedView(out)
    view.log("workerpool1-0", "hello")
    view.log("workerpool0-0", "")
    assert out.getvalue().splitlines() == ["workerpool1-0 | hello", "workerpool0-0 | "]


def test_piped_lines_carry_no_terminal_codes() -> None:
    # Ray colours its `(Worker pid=...)` prefixes and tqdm redraws bars in place: 125 escape codes in one
    # piped local-run (issue 27). What a terminal would have shown is what a pipe gets.
    out = io.StringIO()
    view = PrefixedView(out)
    view.log("workerpool0-0", "\x1b[36m(RayTrainWorker pid=7)\x1b[0m epoch 1, loss 0.5")
    view.log("workerpool0-0", "  3%|▎         | 1/30\r 50%|█████     | 15/30\x1b[A")
    view.log("workerpool0-0", "plain [brackets] stay")
    assert out.getvalue().splitlines() == [
        "workerpool0-0 | (RayTrainWorker pid=7) epoch 1, loss 0.5",
        "workerpool0-0 |  50%|█████     | 15/30",
        "workerpool0-0 | plain [brackets] stay",
    ]


def test_live_table_and_summary_of_a_failed_job(tmp_path: Path, record_dir: Path, kit: Any) -> None:
    spec = kit.standin_spec(record_dir, workers=1, extra=["--sleep", "30", "--fail", "workerpool1-0:4"])
    ctx = JobContext(job_id="v", project="my-project", region="us-central1", gcs_root=str(tmp_path / "gcs"))
    job = start_job(spec, ctx, run_dir=tmp_path / "run", fetch_package=Path, grace_s=2.0)
    result = job.wait(30)
    assert result.state is JobState.FAILED

    view = LiveView("v", tmp_path / "run")
    for name, line in LogFollower().poll(job.log_paths()):
        view.log(name, line)
    console = Console(record=True, width=140, file=io.StringIO())
    console.print(view._render(job))
    table = console.export_text()
    assert "JOB_STATE_FAILED" in table
    assert "workerpool1-0" in table and "FAILED" in table and "workerpool1-0 failing on purpose" in table
    assert "STOPPED" in table  # the chief, stopped because its peer failed

    lines = summary_lines(result, tmp_path / "run")
    assert lines[0].startswith("job JOB_STATE_FAILED after ")
    assert lines[1] == f"last lines of {tmp_path / 'run' / 'logs' / 'workerpool1-0.log'}:"
    assert "  workerpool1-0 failing on purpose" in lines
    assert last_lines(tmp_path / "missing.log") == []


class _ClosedPipeView(View):
    """A view whose output went away, as under `vertexdist local-run ... | head -1`."""

    def log(self, replica: str, line: str) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_failing_view_stops_the_job_instead_of_orphaning_it(
    tmp_path: Path, record_dir: Path, kit: Any
) -> None:
    spec = kit.standin_spec(record_dir, workers=1, extra=["--sleep", "60", "--spawn", "1"])
    ctx = JobContext(job_id="v", project="my-project", region="us-central1", gcs_root=str(tmp_path / "gcs"))
    events: queue.Queue[JobEvent] = queue.Queue()
    job = start_job(spec, ctx, run_dir=tmp_path / "run", fetch_package=Path, grace_s=2.0, on_event=events.put)
    try:
        with pytest.raises(BrokenPipeError):
            follow_local(job, _ClosedPipeView(), events, interval_s=0.02)
        assert job.done and job.state is JobState.CANCELLED
        kit.assert_no_orphans(kit.records(record_dir), [r.pid for r in job.replicas() if r.pid])
    finally:
        job.cancel()
        job.wait(30)
