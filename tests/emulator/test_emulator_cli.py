"""`vertexdist emulator start` as users run it: its own process, endpoints on stdout, stopped by SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from vertexdist.local.procs import live_processes

pytestmark = pytest.mark.integration


def test_emulator_start_prints_endpoints_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "emulator", "start", "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_GCE_CHECK": "true"},
    )
    try:
        assert proc.stdout is not None
        vertex = proc.stdout.readline().strip()
        storage = proc.stdout.readline().strip()
        assert vertex.startswith("VERTEX_API_ENDPOINT=http://127.0.0.1:")
        assert storage.startswith("STORAGE_EMULATOR_HOST=http://127.0.0.1:")
        endpoint = vertex.split("=", 1)[1]
        url = f"{endpoint}/v1/projects/test-proj/locations/us-central1/trainingPipelines"
        with urllib.request.urlopen(url, timeout=10) as response:
            assert json.loads(response.read()) == {"trainingPipelines": []}
        with urllib.request.urlopen(
            storage.split("=", 1)[1] + "/storage/v1/b?project=p", timeout=10
        ) as response:
            assert response.status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            returncode = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert (tmp_path / "data").is_dir()


def _alive(pid: int) -> bool:
    """Running (not a zombie waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def test_a_killed_emulator_leaves_no_job_running(tmp_path: Path) -> None:
    """SIGKILL the emulator and the job's watchdog mid-job: on restart the job is FAILED with the reason,
    its replicas gone."""
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "emulator", "start", "--data-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "NO_GCE_CHECK": "true"},
    )
    replica_pids: list[int] = []
    try:
        assert proc.stdout is not None
        endpoint = proc.stdout.readline().strip().split("=", 1)[1]
        body = {
            "displayName": "doomed",
            "jobSpec": {
                "workerPoolSpecs": [
                    {
                        "machineSpec": {"machineType": "n1-standard-4"},
                        "replicaCount": 1,
                        "containerSpec": {
                            "imageUri": "x",
                            "command": [sys.executable, "-c", "import time; time.sleep(120)"],
                        },
                    }
                ]
            },
        }
        request = urllib.request.Request(
            f"{endpoint}/v1/projects/test-proj/locations/us-central1/customJobs",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            name = json.loads(response.read())["name"]
        record = data / "resources" / "customJobs" / f"{name.rsplit('/', 1)[1]}.json"
        deadline = time.monotonic() + 30
        while not replica_pids:
            assert time.monotonic() < deadline, "the job never recorded its replicas"
            time.sleep(0.1)
            saved = json.loads(record.read_text()) if record.exists() else {}
            if saved.get("state") == "JOB_STATE_RUNNING":
                replica_pids = saved.get("_pids", [])
        # The job's watchdog would stop the replicas within seconds (tests/local/test_supervisor_death.py);
        # with it killed too, nothing does until the next emulator on this data folder starts.
        watchdogs = [
            p.pid
            for p in live_processes()
            if p.ppid == proc.pid and b"watchdog.py" in Path(f"/proc/{p.pid}/cmdline").read_bytes()
        ]
        assert len(watchdogs) == 1
        os.kill(watchdogs[0], signal.SIGKILL)
        proc.kill()
        proc.wait(timeout=10)
        time.sleep(0.5)
        assert all(_alive(pid) for pid in replica_pids)  # orphaned: nobody stopped them

        from vertexdist.emulator import Emulator

        with Emulator(data_dir=data) as restarted:
            job = restarted.service.get(name)
        assert job["state"] == "JOB_STATE_FAILED"
        assert "emulator stopped while this job was running" in job["error"]["message"]
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in replica_pids):
            assert time.monotonic() < deadline, "the restarted emulator left the orphaned replicas running"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in replica_pids:
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)
