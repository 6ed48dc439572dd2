"""A silent job in the console (issue 46): the latest line of a job that printed nothing and made no step for
`health.silence` stands under the job page's header while the job runs, and is in its timeline. A local run's
come from its events; a Vertex or emulator job's from its logs' `service` lines (the emulator's path end to
end: tests/emulator/test_silent_job.py)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from vertexdist.backends.base import LogChunk, StateChange
from vertexdist.console.notes import merge_notes, service_notes, silence_notice

LINE = "no output and no step for 2s; the job goes on: rank 0 (workerpool0-0) is in <module> (task.py:3)"


def test_service_lines_join_the_timeline_with_the_jobs_state_at_their_time() -> None:
    steps = [StateChange("2026-01-01T00:00:00Z", "PENDING"), StateChange("2026-01-01T00:00:05Z", "RUNNING")]
    chunks = [
        LogChunk("workerpool0-0", "hello", timestamp="2026-01-01T00:00:06Z"),
        LogChunk("service", "restarting workerpool0-0", timestamp="2026-01-01T00:00:02Z"),
        LogChunk("service", LINE, timestamp="2026-01-01T00:00:09Z"),
    ]
    merged = merge_notes(steps, service_notes(chunks))
    assert [(s.state, s.replica, s.message) for s in merged] == [
        ("PENDING", None, ""),
        ("PENDING", "service", "restarting workerpool0-0"),
        ("RUNNING", None, ""),
        ("RUNNING", "service", LINE),
    ]
    assert silence_notice(merged, "RUNNING") == merged[-1]
    assert silence_notice(merged, "SUCCEEDED") is None  # an ended job is no longer silent
    assert silence_notice(merged[:-1], "RUNNING") is None


def _until(condition: Any, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


WAITS = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.05)\n"


@pytest.mark.integration
def test_a_silent_local_run_shows_its_line_under_the_header_until_it_ends(tmp_path: Path, kit: Any) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from vertexdist.console.app import build_app
    from vertexdist.console.jobs import Console
    from vertexdist.console.refs import JobRef

    runs = tmp_path / "runs"
    runs.mkdir()
    go = tmp_path / "go"
    pool = {
        **kit.command_pool(""),
        "containerSpec": {
            "imageUri": "example.com/standin:x",
            "command": [sys.executable, "-c", WAITS, str(go)],
            "env": [{"name": "VERTEXDIST_HEALTH", "value": json.dumps({"silence": 1})}],
        },
    }
    job = kit.run_local_job(runs, [pool], "quiet-job", wait=False)
    console = Console(runs, cache_dir=tmp_path / "cache")
    client = TestClient(build_app(console, poll_s=0.05), base_url="http://127.0.0.1")
    url = f"/api/status/local/{job}"
    try:
        _until(lambda: client.get(url).json()["facts"]["silence"], 60, "the silence line")
        told = client.get(url).json()["facts"]["silence"]
        assert "no output and no step for" in told and "no rank has said where it is yet" in told
        page = client.get(f"/jobs/local/{job}").text
        assert 'id="job-silence"' in page and "no output and no step for" in page.split('id="job-silence"')[1]
        assert '<span class="msg note-silence">no output and no step for' in page  # amber, not a hang's red
    finally:
        go.write_text("go")
    _until(lambda: client.get(url).json()["state"] == "SUCCEEDED", 60, "the job to end")
    assert client.get(url).json()["facts"]["silence"] == ""
    timeline = [step.message for step in console.timeline(JobRef("local", job))]
    assert any("no output and no step for" in message for message in timeline)
