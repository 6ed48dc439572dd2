"""kill -9 of one DDP worker mid-run with `restart_job_on_worker_restart`: the job restarts, the trainer
resumes from its checkpoint, and the final model equals an uninterrupted run's bit for bit (real DDP).

The interrupted run is cold and `--warm` (`replica_start`, tests/conftest.py: its replicas, the restarted
ones too, forked from the session's warm pool); both are held to one cold uninterrupted run's model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from vertexdist.local.procs import live_processes

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OUTPUT_BASE = Path("gcs/my-bucket/staging/vertexdist/output/resume-test")
TEMPLATE = {
    "display_name": "resume-test",
    "project": "my-project",
    "staging_bucket": "gs://my-bucket/staging",
    "trainer": {
        "args": [
            "--epochs=2",
            "--batch-size=4",
            "--samples=3000",
            "--data=synthetic",
            "--seed=3",
            "--checkpoint-every=40",
            "--rdzv-timeout=30",
        ],
        "env": {"OMP_NUM_THREADS": "1"},
    },
    "replica_count": 2,
    "restart_job_on_worker_restart": True,
    "timeout": "150s",
}


def _local_run(template: Path, out: Path, cwd: Path, start: Any = None) -> subprocess.Popen[str]:
    cli = start.local_run() if start else [sys.executable, "-m", "vertexdist", "local-run"]
    return subprocess.Popen(
        [*cli, str(template), "--out", str(out), "--json"],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _assert_same(a: Any, b: Any, where: str = "model") -> None:
    import torch

    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a, b), f"{where} differs"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            _assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def _job_folders(run_dir: Path) -> list[Path]:
    base = run_dir / OUTPUT_BASE
    return sorted(base.iterdir()) if base.is_dir() else []


def _children(pid: int) -> list[int]:
    return [p.pid for p in live_processes() if p.ppid == pid]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted run's model (cold), for every variant of the interrupted one."""
    folder = tmp_path_factory.mktemp("baseline")
    template = folder / "job.yaml"
    template.write_text(yaml.safe_dump(TEMPLATE))
    proc = _local_run(template, folder / "run", folder)
    out, _ = proc.communicate(timeout=170)
    assert proc.returncode == 0, out[-3000:]
    (job_folder,) = _job_folders(folder / "run")
    return job_folder / "model" / "model.pt"


def test_kill_9_of_a_worker_restarts_the_job_and_the_model_matches_an_uninterrupted_run(
    tmp_path: Path, kit: Any, baseline: Path, replica_start: Any
) -> None:
    import torch

    template = tmp_path / "job.yaml"
    template.write_text(yaml.safe_dump(TEMPLATE))
    interrupted = tmp_path / "interrupted"
    proc = _local_run(template, interrupted, tmp_path, start=replica_start)
    lines: list[str] = []
    worker_pid: dict[str, int] = {}
    got_pid = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            event = json.loads(line) if line.startswith("{") else {}
            if (
                event.get("event") == "replica"
                and event.get("replica") == "workerpool1-0"
                and event.get("pid")
            ):
                worker_pid.setdefault("replica", int(event["pid"]))
                got_pid.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert got_pid.wait(60), "".join(lines)
    # Restarts of the same job keep its own output folder (named by its job id) and resume from it.
    assert kit.wait_for(lambda: len(_job_folders(interrupted)) == 1, timeout=60), "".join(lines)[-3000:]
    latest = _job_folders(interrupted)[0] / "checkpoints" / "LATEST"
    assert kit.wait_for(latest.exists, timeout=60), "".join(lines)[-3000:]
    replica = worker_pid["replica"]
    workers = _children(replica)
    victim = workers[0] if workers else replica  # the DDP worker process, else the replica itself
    os.kill(victim, signal.SIGKILL)
    proc.wait(timeout=170)
    reader.join(timeout=10)
    assert proc.returncode == 0, "".join(lines)[-6000:]

    events = [json.loads(line) for line in lines if line.startswith("{")]
    summary = events[-1]
    logs = "\n".join(
        f"== {p.name}\n{p.read_text()[-2500:]}" for p in sorted((interrupted / "logs").glob("*.log"))
    )
    assert summary["event"] == "summary" and summary["restarts"] == 1, f"{summary}\n{logs}"
    restart_messages = [
        e["message"] for e in events if e["event"] == "job" and "restarting" in e.get("message", "")
    ]
    # Which replica exits first is a race: the killed worker's replica, or its peer that loses the connection.
    assert len(restart_messages) == 1 and "exited with a non-zero status" in restart_messages[0]

    replica_pids = {int(e["pid"]) for e in events if e["event"] == "replica" and e.get("pid")}
    assert len(replica_pids) == 4  # 2 replicas x 2 attempts
    assert not [pid for pid in replica_pids if kit.process_alive(pid) or kit.group_members(pid)]

    assert _job_folders(interrupted) == [interrupted / OUTPUT_BASE / summary["job_id"]]
    expected = torch.load(baseline, map_location="cpu")
    actual = torch.load(_job_folders(interrupted)[0] / "model" / "model.pt", map_location="cpu")
    try:
        _assert_same(expected, actual)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{logs}") from None
