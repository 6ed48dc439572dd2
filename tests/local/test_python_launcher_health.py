"""`launcher: python` in a local run: every replica's process of the user's own module carries the rank's
health watcher (heartbeats in the run folder), with no change to the script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.integration]

SCRIPT = (
    "import time\nfrom vertexdist_launcher import health\nhealth.step()\ntime.sleep(2.5)\nhealth.step()\n"
)


def test_each_replica_of_a_python_launcher_job_writes_its_heartbeat(tmp_path: Path) -> None:
    (tmp_path / "user_script.py").write_text(SCRIPT)
    doc = {
        "display_name": "python-health",
        "project": "my-project",
        "staging_bucket": "gs://my-bucket/staging",
        "machine_type": "n1-standard-4",
        "replica_count": 2,
        "trainer": {"script": "user_script.py", "launcher": "python"},
    }
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(doc))
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "vertexdist", "local-run", "job.yaml", "--out", str(run), "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert json.loads(done.stdout.splitlines()[-1])["state"] == "JOB_STATE_SUCCEEDED", done.stderr
    beats = {p.name: json.loads(p.read_text()) for p in (run / "health" / "ranks").glob("rank-*.json")}
    assert sorted(beats) == ["rank-0.json", "rank-1.json"], beats
    assert {b["replica"] for b in beats.values()} == {"workerpool0-0", "workerpool1-0"}
    assert all(b["step"] == 2 for b in beats.values()), beats
