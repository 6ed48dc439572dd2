"""No replica outlives its supervisor (issue 12): `kill -9` of `local-run` or of `vertexdist emulator start`
during a 2-replica job takes every process of the job down within 10 s: the replicas, the workers in their
groups, and workers that started sessions of their own. Real processes, real SIGKILL."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.integration

STANDIN = Path(__file__).with_name("standin_replica.py")
DEADLINE_S = 10.0


def _job_pids(recorded: dict[str, dict[str, Any]]) -> list[int]:
    return [int(r["pid"]) for r in recorded.values()] + [
        int(p) for r in recorded.values() for p in r["worker_pids"]
    ]


def _all_gone_within(kit: Any, recorded: dict[str, dict[str, Any]], seconds: float) -> float:
    """Seconds until every process of the job was gone; fails with what is left after `seconds`."""
    started = time.monotonic()
    pids = _job_pids(recorded)
    assert len(pids) == 6  # 2 replicas, each with a worker in its group and one in its own session
    kit.wait_for(lambda: not any(kit.process_alive(pid) for pid in pids), timeout=seconds)
    kit.assert_no_orphans(recorded)
    return time.monotonic() - started


def _kill_leftovers(recorded: dict[str, dict[str, Any]]) -> None:
    for pid in _job_pids(recorded):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def test_kill_9_of_local_run_takes_every_process_of_the_job_down(tmp_path: Path, kit: Any) -> None:
    record = tmp_path / "records"
    record.mkdir()
    template = tmp_path / "job.yaml"
    args = ["--record", str(record), "--sleep", "120", "--spawn", "1", "--spawn-session", "1"]
    template.write_text(
        yaml.safe_dump(
            {
                "display_name": "doomed-supervisor",
                "project": "my-project",
                "staging_bucket": "gs://my-bucket/staging",
                "trainer": {"script": str(STANDIN), "args": args},
                "replica_count": 2,
            }
        )
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "local-run", str(template), "--out", str(tmp_path / "run")],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    recorded: dict[str, dict[str, Any]] = {}
    try:
        assert kit.wait_for(lambda: len(kit.records(record)) == 2, timeout=60)
        recorded = kit.records(record)
        proc.kill()
        proc.wait(timeout=10)
        assert _all_gone_within(kit, recorded, DEADLINE_S) < DEADLINE_S
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_leftovers(recorded)


def _start_emulator(data: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "emulator", "start", "--data-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "NO_GCE_CHECK": "true"},
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip().split("=", 1)[1]


def _create_job(endpoint: str, spec: dict[str, Any]) -> str:
    request = urllib.request.Request(
        f"{endpoint}/v1/projects/test-proj/locations/us-central1/customJobs",
        data=json.dumps({"displayName": "doomed", "jobSpec": spec}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(json.loads(response.read())["name"])


def test_kill_9_of_the_emulator_takes_its_running_jobs_down(tmp_path: Path, kit: Any) -> None:
    record = tmp_path / "records"
    record.mkdir()
    spec = kit.standin_spec(record, extra=["--sleep", "120", "--spawn", "1", "--spawn-session", "1"])
    proc, endpoint = _start_emulator(tmp_path / "data")
    recorded: dict[str, dict[str, Any]] = {}
    try:
        _create_job(endpoint, spec)
        assert kit.wait_for(lambda: len(kit.records(record)) == 2, timeout=60)
        recorded = kit.records(record)
        proc.kill()
        proc.wait(timeout=10)
        assert _all_gone_within(kit, recorded, DEADLINE_S) < DEADLINE_S
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_leftovers(recorded)
