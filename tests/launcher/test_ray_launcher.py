"""The shipped launcher's ray mode as real processes, without vertexdist around it: a one-node cluster
whose launcher is SIGKILLed takes every Ray process with it; a replica without Ray says so; replicas
that are not training nodes run the code once, with no Ray node."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vertexdist.local.procs import live_processes
from vertexdist.shipped import LAUNCHER_DIR

pytestmark = pytest.mark.integration

DRIVER = """\
import json, os, pathlib, sys, time
import ray
ray.init(address="auto")
@ray.remote
def where():
    return {"pid": os.getpid(), "pgid": os.getpgid(0)}
record = {"driver": os.getpid(), "task": ray.get(where.remote())}
pathlib.Path(sys.argv[1]).write_text(json.dumps(record))
time.sleep(300)
"""


AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")


def command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def launcher_env(**extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "CLUSTER_SPEC", "RAY_ADDRESS")
        and not key.startswith(("TORCHELASTIC_", "VERTEXDIST_"))
    }
    return {**env, "PYTHONPATH": str(LAUNCHER_DIR.parent), **extra}


def launch(
    tmp_path: Path, *argv: str, python: tuple[str, ...] = (sys.executable,), **env: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*python, "-m", "vertexdist_launcher", *argv],
        env=launcher_env(**env),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


@pytest.mark.slow
def test_a_sigkilled_launchers_ray_node_dies_with_it_or_stays_in_its_process_group(tmp_path: Path) -> None:
    (tmp_path / "driver.py").write_text(DRIVER)
    record = tmp_path / "record.json"
    # A local run's share (VERTEXDIST_NPROC_PER_NODE): the node's files go under this folder.
    launcher = launch(tmp_path, "ray", "--", "driver.py", str(record), VERTEXDIST_NPROC_PER_NODE="1")
    deadline = time.monotonic() + 120
    while not record.is_file() and time.monotonic() < deadline and launcher.poll() is None:
        time.sleep(0.2)
    assert record.is_file(), launcher.communicate(timeout=30)[0]
    time.sleep(0.2)
    seen = json.loads(record.read_text())
    group = [p.pid for p in live_processes() if p.pgid == launcher.pid]
    # gcs_server, raylet, agents, the driver and Ray's worker: all in the launcher's process group.
    assert seen["task"]["pgid"] == launcher.pid and seen["driver"] in group and len(group) >= 6
    assert (tmp_path / "ray" / "ray-start.log").is_file()
    launcher.kill()  # no handler, no cleanup: only the kernel's parent-death signals are left
    launcher.communicate(timeout=30)
    deadline = time.monotonic() + 30
    daemons = {pid for pid in group if not command(pid).startswith(AGENTS)}
    while (alive := {p.pid for p in live_processes()} & daemons) and time.monotonic() < deadline:
        time.sleep(0.2)
    # The node's daemons, the driver and Ray's workers die with the launcher...
    assert not alive, f"left running: {sorted(alive)}"
    # ...and Ray's two agents (they outlive a killed raylet while they try to tell its GCS) never left
    # the replica's process group, which is what the local runner (and a Vertex VM's end) stops.
    left = [p for p in live_processes() if p.pid in set(group)]
    assert all(p.pgid == launcher.pid for p in left)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(launcher.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while [p for p in live_processes() if p.pgid == launcher.pid] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p.pid for p in live_processes() if p.pgid == launcher.pid] == []


def test_a_replica_without_ray_says_what_to_install_and_fails(tmp_path: Path) -> None:
    # -S: this interpreter without its site-packages, where Ray is.
    launcher = launch(tmp_path, "ray", "--", "-m", "user.task", python=(sys.executable, "-S"))
    out, _ = launcher.communicate(timeout=60)
    assert launcher.returncode == 1, out
    [line] = out.splitlines()
    assert line.startswith("vertexdist_launcher: workerpool0-0 failed: `launcher: ray` needs Ray on every")
    assert "add ray[train,tune]==2.60.0 to trainer.requirements" in line
    assert "pip install 'vertexdist[ray]'" in line


def test_torchrun_options_are_refused_by_the_ray_mode(tmp_path: Path) -> None:
    launcher = launch(tmp_path, "ray", "--nproc-per-node", "2", "--", "-m", "user.task")
    out, _ = launcher.communicate(timeout=60)
    assert launcher.returncode == 2, out
    assert "are torchrun's" in out


@pytest.mark.parametrize("pool", ["workerpool2", "workerpool3"])
def test_a_replica_that_is_no_training_node_runs_the_code_once_without_a_ray_node(
    tmp_path: Path, pool: str
) -> None:
    (tmp_path / "once.py").write_text("import os, sys\nprint('ran once', os.getpid(), sys.argv[1:])\n")
    cluster = {"workerpool0": ["wp0:2222"], "workerpool1": ["wp1:2222"], pool: ["other:2222"]}
    spec = json.dumps({"cluster": cluster, "task": {"type": pool, "index": 0}})
    launcher = launch(tmp_path, "ray", "--", "once.py", "--x", CLUSTER_SPEC=spec)
    out, _ = launcher.communicate(timeout=60)
    assert launcher.returncode == 0, out
    assert f"ran once {launcher.pid} ['--x']" in out  # exec'd: the launcher's own process, no Ray
    assert "not a training node: running `python once.py --x` once, without ray" in out
    assert not (tmp_path / "ray").exists()
