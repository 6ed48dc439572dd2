"""The shipped launcher as real processes: signals reach torchrun and every worker, a SIGKILLed launcher
takes its workers with it, a failed rank is named last, and replicas that are not training nodes run the
user's code once without torchrun."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from vertexdist.local.procs import live_processes
from vertexdist.shipped import LAUNCHER_DIR

# Every test here waits for torch workers to start: a bound, not an aim. `make stress` (2 shared cores, a CPU
# hog, load average near 20) saw 2-3 workers take over 60 s to import torch and start; a bound this wide is
# only reached by a launcher that hangs.
START_BOUND_S = 150.0
pytestmark = [pytest.mark.integration, pytest.mark.timeout(360)]

# A worker that needs no torch: it records itself, then waits to be stopped.
RECORDER = """\
import json, os, pathlib, sys, time
folder = pathlib.Path(sys.argv[1])
rank = os.environ.get("LOCAL_RANK", "none")
names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")
record = {k: os.environ.get(k) for k in names}
record.update(pid=os.getpid(), pgid=os.getpgid(0), argv=sys.argv[1:])
(folder / f"{rank}.json").write_text(json.dumps(record))
if len(sys.argv) > 2 and sys.argv[2] == "fail" and rank == "1":
    raise ValueError("bad batch 7")
if len(sys.argv) > 2 and sys.argv[2] == "wait":
    time.sleep(120)
"""


def launcher_env(**extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "CLUSTER_SPEC")
        and not key.startswith(("TORCHELASTIC_", "VERTEXDIST_"))
    }
    env["PYTHONPATH"] = str(LAUNCHER_DIR.parent)
    env.update(extra)
    return env


def start(tmp_path: Path, *target_args: str, nproc: int = 2, **env: str) -> subprocess.Popen[str]:
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER)
    (tmp_path / "records").mkdir(exist_ok=True)
    argv = ["torchrun", "--nproc-per-node", str(nproc), "--", str(script), str(tmp_path / "records")]
    # torchrun's own temp folder (torchelastic_*) inside the test's, as a local run keeps it in the job's:
    # a launcher these tests SIGKILL never removes it.
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "vertexdist_launcher", *argv, *target_args],
        env=launcher_env(TMPDIR=str(temp), **env),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def records(tmp_path: Path, count: int, timeout: float = START_BOUND_S) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    folder = tmp_path / "records"
    while time.monotonic() < deadline:
        found = sorted(folder.glob("*.json"))
        if len(found) == count:
            time.sleep(0.1)  # let the last writer finish its file
            return [json.loads(p.read_text()) for p in found]
        time.sleep(0.05)
    raise AssertionError(f"{len(list(folder.glob('*.json')))} of {count} workers started")


def left_alive(pids: list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        alive = {p.pid for p in live_processes()} & set(pids)
        if not alive or time.monotonic() > deadline:
            return sorted(alive)
        time.sleep(0.05)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_to_the_launcher_stops_torchrun_and_every_worker(
    tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    launcher = start(tmp_path, "wait")
    workers = records(tmp_path, 2)
    # torchrun starts each worker in a session of its own: a process-group kill would not reach them.
    assert {w["pgid"] for w in workers} == {w["pid"] for w in workers}
    launcher.send_signal(sig)
    out, _ = launcher.communicate(timeout=40)
    assert launcher.returncode == code, out
    assert left_alive([w["pid"] for w in workers]) == []
    assert f"workerpool0-0 stopped by {sig.name}" in out.splitlines()[-1]


def test_a_sigkilled_launcher_takes_its_workers_with_it(tmp_path: Path) -> None:
    launcher = start(tmp_path, "wait")
    workers = records(tmp_path, 2)
    launcher.kill()
    launcher.communicate(timeout=20)
    assert left_alive([w["pid"] for w in workers]) == []


def test_a_failed_rank_is_named_last_with_its_error(tmp_path: Path) -> None:
    launcher = start(tmp_path, "fail")
    out, _ = launcher.communicate(timeout=START_BOUND_S)
    lines = out.splitlines()
    assert launcher.returncode == 1, out
    assert lines[-2] == "vertexdist_launcher: workerpool0-0: local rank 1: ValueError: bad batch 7"
    assert lines[-1].startswith(
        "vertexdist_launcher: workerpool0-0 failed: local rank 1 (global rank 1) exited with status 1"
    )


# Two gloo ranks; rank 1 aborts at its end (what a gloo/c10d teardown race does to a rank), rank 0 waits to
# be stopped, so the abort is the first failure.
ABORTS_AT_ITS_END = """\
import os, time
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
total = torch.ones(1)
dist.all_reduce(total)
os.write(1, f"rank {dist.get_rank()} sum {int(total.item())}\\n".encode())  # one write: ranks share a pipe
if dist.get_rank() == 1:
    os.abort()
time.sleep(120)
"""


def test_a_rank_killed_by_sigabrt_gets_the_abort_hint(tmp_path: Path) -> None:
    script = tmp_path / "aborts.py"
    script.write_text(ABORTS_AT_ITS_END)
    launcher = subprocess.Popen(
        [sys.executable, "-m", "vertexdist_launcher", "torchrun", "--nproc-per-node", "2", "--", str(script)],
        env=launcher_env(TMPDIR=str(tmp_path)),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out, _ = launcher.communicate(timeout=START_BOUND_S)
    lines = out.splitlines()
    assert launcher.returncode == 1, out
    assert "rank 1 sum 2" in lines  # it got through its collective, then aborted
    assert "Signal 6 (SIGABRT)" in out  # torchrun's own failure record
    assert lines[-2].startswith("vertexdist_launcher: workerpool0-0: hint: SIGABRT usually comes from torch")
    assert lines[-1].startswith(
        "vertexdist_launcher: workerpool0-0 failed: local rank 1 (global rank 1) was killed by SIGABRT"
    )


def test_workers_see_what_torchrun_gives_them(tmp_path: Path) -> None:
    launcher = start(tmp_path, "--flag", nproc=3)
    out, _ = launcher.communicate(timeout=START_BOUND_S)
    assert launcher.returncode == 0, out
    found = records(tmp_path, 3)
    assert sorted(w["LOCAL_RANK"] for w in found) == ["0", "1", "2"]
    assert {(w["WORLD_SIZE"], w["LOCAL_WORLD_SIZE"], w["GROUP_RANK"]) for w in found} == {("3", "3", "0")}
    assert {tuple(w["argv"][1:]) for w in found} == {("--flag",)}


@pytest.mark.parametrize("pool", ["workerpool2", "workerpool3"])
def test_a_replica_that_is_no_training_node_runs_the_code_once_without_torchrun(
    tmp_path: Path, pool: str
) -> None:
    cluster = {"workerpool0": ["wp0:2222"], "workerpool1": ["wp1:2222"], pool: ["other:2222"]}
    spec = json.dumps({"cluster": cluster, "task": {"type": pool, "index": 0}})
    launcher = start(tmp_path, CLUSTER_SPEC=spec)
    out, _ = launcher.communicate(timeout=30)
    assert launcher.returncode == 0, out
    [record] = records(tmp_path, 1)
    assert record["LOCAL_RANK"] is None and record["pid"] == launcher.pid  # exec'd: no torchrun, once
    assert f"{pool}-0 is a" in out and "not a training node" in out


def test_a_bad_command_line_is_a_usage_error(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "vertexdist_launcher", "torchrun", "-m", "x"],
        env=launcher_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "`--` must separate" in result.stderr and "usage: python -m vertexdist_launcher" in result.stderr
