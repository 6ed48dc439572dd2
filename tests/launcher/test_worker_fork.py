"""The launcher's fork server (`vertexdist_launcher/worker_fork.py`): torchrun's workers forked from a warm
launcher run as `python -u -m vertexdist_launcher.worker` would, and die with the launcher (SIGKILL too)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vertexdist.shipped.vertexdist_launcher.worker_fork import worker_args

SHIPPED = Path(__file__).resolve().parents[2] / "vertexdist" / "shipped"

# A warm launcher (torch imported first), its fork server, and one worker through torch's own handler.
LAUNCHER = """
import json, os, signal, sys, time
import torch


def say(line):  # one write: the worker writes to the same pipe
    os.write(1, (json.dumps(line) + "\\n").encode())

from vertexdist_launcher import worker_fork
assert worker_fork.ARRIVED_WARM
os.environ["VERTEXDIST_LAUNCHER_PID"] = str(os.getpid())
server = worker_fork.ForkServer()
worker_fork.install(server)
from torch.distributed.elastic.multiprocessing.subprocess_handler import get_subprocess_handler
handler = get_subprocess_handler(
    sys.executable, ("-u", "-m", "vertexdist_launcher.worker", *sys.argv[1:]), {"RANK": "3"}, "", "", 0
)
say({"launcher": os.getpid(), "server": server.pid, "worker": handler.proc.pid})
if os.environ.get("HANG"):
    time.sleep(60)
say({"exit": handler.proc.wait(30), "polled": handler.proc.poll()})
"""
WORKER = """
import json, os, sys, time
line = {"pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "argv": sys.argv,
        "rank": os.environ.get("RANK"), "main": __name__, "cwd": os.getcwd()}
os.write(1, (json.dumps(line) + "\\n").encode())  # one write: the launcher writes to the same pipe
print("to stderr", file=sys.stderr, flush=True)
if len(sys.argv) > 1 and sys.argv[1] == "sleep":
    time.sleep(60)
sys.exit(5)
"""


def test_only_the_launchers_own_worker_command_is_forked() -> None:
    python = sys.executable
    assert worker_args([python, "-u", "-m", "vertexdist_launcher.worker", "-m", "pkg.task", "--x"]) == [
        "-m",
        "pkg.task",
        "--x",
    ]
    assert worker_args([python, "-u", "-m", "other.module"]) is None
    assert worker_args(["/other/python", "-u", "-m", "vertexdist_launcher.worker", "s.py"]) is None


def _launch(tmp_path: Path, *args: str, hang: bool = False) -> subprocess.Popen[str]:
    (tmp_path / "launcher.py").write_text(LAUNCHER)
    (tmp_path / "user.py").write_text(WORKER)
    env = {**os.environ, "PYTHONPATH": f"{SHIPPED}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if hang:
        env["HANG"] = "1"
    return subprocess.Popen(
        [sys.executable, str(tmp_path / "launcher.py"), str(tmp_path / "user.py"), *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.integration
def test_a_forked_worker_runs_as_a_new_one_would_and_reports_its_exit_status(tmp_path: Path) -> None:
    proc = _launch(tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    started, worker, ended = lines[0], lines[1], lines[2]
    assert worker["pid"] == started["worker"] and worker["ppid"] == started["server"]
    assert worker["pgid"] == worker["pid"]  # a session of its own, as torchrun's workers have
    assert worker["argv"] == [str(tmp_path / "user.py")] and worker["main"] == "__main__"
    assert worker["rank"] == "3" and worker["cwd"] == str(tmp_path)
    assert "to stderr" in err
    assert ended == {"exit": 5, "polled": 5}


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


@pytest.mark.integration
def test_a_killed_launcher_takes_its_fork_server_and_workers_with_it(tmp_path: Path) -> None:
    proc = _launch(tmp_path, "sleep", hang=True)
    assert proc.stdout is not None
    started = json.loads(proc.stdout.readline())
    if "server" not in started:  # the worker said its line first: they share the pipe
        started = json.loads(proc.stdout.readline())
    pids = [started["server"], started["worker"]]
    try:
        assert all(_alive(pid) for pid in pids)
        proc.kill()
        proc.wait(10)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in pids):
            assert time.monotonic() < deadline, [pid for pid in pids if _alive(pid)]
            time.sleep(0.05)
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
