"""A job page's header while the job runs: what the page polls (`/api/status`, the log stream's `status`
events) carries its Started, Ended, Duration and cost as the page shows them, so they do not stay at their
page-load values (issue 36 item 7; the browser test checks the page applies them)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from vertexdist.console.app import build_app, stamp
from vertexdist.console.jobs import Console
from vertexdist.console.refs import JobRef

pytestmark = [pytest.mark.integration]

WAITS = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.05)\nprint('done')\n"


def _until(condition: Any, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_the_polled_status_carries_the_headers_moving_facts(tmp_path: Path, kit: Any) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    go = tmp_path / "go"
    command = [sys.executable, "-c", WAITS, str(go)]
    pool = {
        **kit.command_pool(""),
        "containerSpec": {"imageUri": "example.com/standin:x", "command": command},
    }
    job = kit.run_local_job(runs, [pool], "header-job", wait=False)
    console = Console(runs, cache_dir=tmp_path / "cache")
    client = TestClient(build_app(console, poll_s=0.05), base_url="http://127.0.0.1")
    url = f"/api/status/local/{job}"
    _until(lambda: client.get(url).json()["facts"]["started"] != "—", 30, "the job to run")
    first = client.get(url).json()["facts"]
    assert first["ended"] == "—" and first["cost"].startswith("$")
    _until(lambda: client.get(url).json()["facts"]["duration"] != first["duration"], 10, "the duration")
    go.write_text("go")
    # (Its end time may be written a moment after its state.)
    _until(lambda: client.get(url).json()["facts"]["ended"] != "—", 30, "the job to end")
    ended = client.get(url).json()["facts"]
    assert ended["ended"] == stamp(console.status(JobRef("local", job)).end_time) != "—"
    # The log stream's status events carry them too (what an open page applies).
    with client.stream("GET", f"/api/logs/local/{job}") as answer:
        events = [block for block in answer.read().decode().strip().split("\n\n") if "event: status" in block]
    data = json.loads(events[-1].split("data: ", 1)[1])
    assert data["facts"] == ended and "timeline" in data
