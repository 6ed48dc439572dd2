"""`launcher: ray` jobs through `local-run`, as a user meets them: each replica a real Ray node on this
machine. A failed driver fails the job with its own error, a Ray node killed mid-run fails the job within
a minute, and Ctrl-C stops every node; in every case no process of the job is left, Ray's included."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from vertexdist.shipped.vertexdist_launcher.ray_args import RAY_TESTED

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# The driver records itself and a task on every node (pid, process group, session, node), then holds them.
DRIVER = """\
import json, os, pathlib, sys, time
import ray
ray.init()
out = pathlib.Path(sys.argv[1])
def me():
    node = ray.get_runtime_context().get_node_id()
    return {"pid": os.getpid(), "pgid": os.getpgid(0), "sid": os.getsid(0), "node": node}
(out / "driver.json").write_text(json.dumps(me()))
print("driver: joined the cluster", flush=True)
if sys.argv[2] == "fail":
    raise ValueError("bad batch 7")
@ray.remote(num_cpus=1)
def hold(i):
    (out / f"task{i}.json").write_text(json.dumps(me()))
    time.sleep(300)
ray.get([hold.options(scheduling_strategy="SPREAD").remote(i) for i in range(4)])
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One working folder for the module, so the installed-package cache is shared between runs."""
    return tmp_path_factory.mktemp("ray-jobs")


def write_template(tmp_path: Path, *args: str) -> Path:
    (tmp_path / "driver.py").write_text(DRIVER)
    doc = {
        "display_name": "ray-job",
        "project": "my-project",
        "staging_bucket": "gs://my-bucket/staging",
        "container_uri": "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest",
        "machine_type": "n1-standard-4",
        "replica_count": 2,
        "trainer": {
            "script": "driver.py",
            "launcher": "ray",
            "requirements": [RAY_TESTED],
            "args": list(args),
        },
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def start(template: Path, out: Path, workdir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "local-run", str(template), "--out", str(out), "--json"],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def proc_stat(pid: int) -> tuple[int, int] | None:
    """(process group, session) of a live, non-zombie process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return None if fields[0] == "Z" else (int(fields[2]), int(fields[3]))


def job_processes(groups: set[int], run_dir: Path) -> list[str]:
    """Live processes in one of the replicas' process groups or sessions, or naming the run folder."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        stat = proc_stat(int(entry.name))
        try:
            cmdline = entry.joinpath("cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if stat is not None and (stat[0] in groups or stat[1] in groups or str(run_dir) in cmdline):
            found.append(f"{entry.name} {stat} {cmdline[:160]}")
    return found


def wait_for_records(folder: Path, names: set[str], timeout: float = 150.0) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = {p.stem for p in folder.glob("*.json")}
        if names <= found:
            time.sleep(0.2)
            return {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json")}
        time.sleep(0.2)
    raise AssertionError(f"only {sorted(p.name for p in folder.glob('*.json'))} of {sorted(names)} appeared")


def replica_groups(run_dir: Path) -> dict[str, int]:
    summary = json.loads((run_dir / "summary.json").read_text())
    return {r["name"]: int(r["pid"]) for r in summary["replicas"]}


def last_lines(run_dir: Path, replica: str, count: int = 2) -> list[str]:
    return (run_dir / "logs" / f"{replica}.log").read_text().splitlines()[-count:]


def test_a_failed_driver_fails_the_job_with_its_error_on_the_head_and_leaves_nothing(
    workdir: Path, tmp_path: Path
) -> None:
    records = tmp_path / "records"
    records.mkdir()
    out = tmp_path / "run"
    cli = start(write_template(tmp_path, str(records), "fail"), out, workdir)
    stdout, stderr = cli.communicate(timeout=240)
    assert cli.returncode == 1, stdout + stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["state"] == "JOB_STATE_FAILED"
    assert summary["error"]["replica"] == "workerpool0-0", summary  # the head, whose driver failed
    head = last_lines(out, "workerpool0-0")
    assert head[0] == "vertexdist_launcher: workerpool0-0: the Ray driver: ValueError: bad batch 7"
    assert re.fullmatch(
        r"vertexdist_launcher: workerpool0-0 failed: the Ray driver"
        r" `python -m aiplatform_custom_trainer_script\.task \S+ fail` exited with status 1 \(pid \d+\)",
        head[1],
    ), head[1]
    # The worker never reports success for a failed driver: it read the outcome and failed too.
    [worker] = last_lines(out, "workerpool1-0", 1)
    assert worker == (
        "vertexdist_launcher: workerpool1-0 failed: the Ray driver on workerpool0-0 exited with status 1:"
        " ValueError: bad batch 7"
    )
    driver = json.loads((records / "driver.json").read_text())
    groups = set(replica_groups(out).values())
    assert driver["pgid"] in groups  # the driver ran in the head replica's process group
    assert job_processes(groups, out) == []


def test_a_ray_node_killed_mid_run_fails_the_job_within_60s_leaving_nothing(
    workdir: Path, tmp_path: Path
) -> None:
    records = tmp_path / "records"
    records.mkdir()
    out = tmp_path / "run"
    cli = start(write_template(tmp_path, str(records), "hold"), out, workdir)
    try:
        found = wait_for_records(records, {"driver", "task0", "task1", "task2", "task3"})
        tasks = [found[f"task{i}"] for i in range(4)]
        head_group = found["driver"]["pgid"]
        # Ray's workers run in their replica's process group (not one of their own), one node per replica.
        assert {t["pgid"] for t in tasks} == {
            head_group,
            next(t["pgid"] for t in tasks if t["pgid"] != head_group),
        }
        assert len({t["node"] for t in tasks}) == 2
        worker_group = next(t["pgid"] for t in tasks if t["pgid"] != head_group)
        [raylet] = [
            int(p.name)
            for p in Path("/proc").iterdir()
            if p.name.isdigit()
            and proc_stat(int(p.name)) is not None
            and proc_stat(int(p.name))[0] == worker_group  # type: ignore[index]
            and b"raylet/raylet" in (p / "cmdline").read_bytes()
        ]
        killed_at = time.monotonic()
        os.kill(raylet, signal.SIGKILL)
        stdout, stderr = cli.communicate(timeout=90)
        took = time.monotonic() - killed_at
    finally:
        if cli.poll() is None:
            cli.send_signal(signal.SIGINT)
            cli.communicate(timeout=60)
    assert cli.returncode == 1, stdout + stderr
    assert took < 60, f"the job took {took:.0f}s to fail after its Ray node was killed"
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["error"]["replica"] == "workerpool1-0"
    assert "its Ray node stopped" in last_lines(out, "workerpool1-0", 1)[0]
    assert job_processes({head_group, worker_group, *replica_groups(out).values()}, out) == []


def test_ctrl_c_stops_every_ray_node_and_leaves_nothing(workdir: Path, tmp_path: Path) -> None:
    records = tmp_path / "records"
    records.mkdir()
    out = tmp_path / "run"
    cli = start(write_template(tmp_path, str(records), "hold"), out, workdir)
    try:
        found = wait_for_records(records, {"driver", "task0", "task1", "task2", "task3"})
        cli.send_signal(signal.SIGINT)
        stdout, stderr = cli.communicate(timeout=90)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.communicate()
    assert cli.returncode == 130, stdout + stderr
    assert json.loads(stdout.strip().splitlines()[-1])["state"] == "JOB_STATE_CANCELLED"
    groups = {r["pgid"] for r in found.values()} | set(replica_groups(out).values())
    assert len(groups) == 2
    assert job_processes(groups, out) == []
