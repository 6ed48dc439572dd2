"""`launcher: ray` jobs through `local-run`, as a user meets them: each replica a real Ray node on this
machine, two jobs at once. A failed driver fails the job with its own error, a Ray node killed mid-run
fails the job within a minute, Ctrl-C and a timeout stop every node; in every case no process of the job
is left, Ray's included."""

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

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]  # two Ray jobs, loaded CI

# The driver records itself and a task on every node (pid, process group, session, node), then holds them.
# Each task takes all of a node's 2 CPUs (a local run's Ray node of a CPU machine has LOCAL_MIN_CPUS), so
# the two tasks are on the two nodes for certain: one Ray worker process per node to start, not two.
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
@ray.remote(num_cpus=2)
def hold(i):
    (out / f"task{i}.json").write_text(json.dumps(me()))
    time.sleep(300)
ray.get([hold.options(scheduling_strategy="SPREAD").remote(i) for i in range(2)])
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


def start(template: Path, out: Path, workdir: Path, *flags: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "local-run", str(template), "--out", str(out), "--json", *flags],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_records(folder: Path, names: set[str], timeout: float = 300.0) -> dict[str, dict[str, Any]]:
    """The records once all of `names` exist; 300 s: two Ray clusters start beside other tests on 2 cores."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = {p.stem for p in folder.glob("*.json")}
        if names <= found:
            time.sleep(0.2)
            return {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json")}
        time.sleep(0.2)
    logs = folder.parent / "run" / "logs"
    tails = {log.name: log.read_text(errors="replace")[-1500:] for log in sorted(logs.glob("*.log"))}
    raise AssertionError(
        f"only {sorted(p.name for p in folder.glob('*.json'))} of {sorted(names)} appeared"
        f"; the replicas' logs end: {tails}"
    )


def last_lines(run_dir: Path, replica: str, count: int = 2) -> list[str]:
    return (run_dir / "logs" / f"{replica}.log").read_text().splitlines()[-count:]


class Job:
    """One local-run of the recording driver, in its own folder."""

    def __init__(self, kit: Any, workdir: Path, folder: Path, mode: str, *flags: str) -> None:
        self.kit = kit
        folder.mkdir()
        self.records = folder / "records"
        self.records.mkdir()
        self.out = folder / "run"
        self.cli = start(write_template(folder, str(self.records), mode), self.out, workdir, *flags)
        self.stdout = self.stderr = ""

    def finish(self, timeout: float) -> dict[str, Any]:
        """Wait for the CLI; the job's summary (its last JSON line)."""
        try:
            self.stdout, self.stderr = self.cli.communicate(timeout=timeout)
        finally:
            if self.cli.poll() is None:
                self.cli.kill()
                self.cli.communicate()
        return dict(json.loads(self.stdout.strip().splitlines()[-1]))

    def groups(self) -> set[int]:
        return set(self.kit.replica_groups(self.out))


def worker_raylet(kit: Any, group: int) -> int:
    [raylet] = [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit()
        and (stat := kit.proc_stat(int(p.name))) is not None
        and stat[0] == group
        and b"raylet/raylet" in (p / "cmdline").read_bytes()
    ]
    return raylet


# Two jobs at once in each test: side by side on this machine, as two users' jobs would be.


def test_a_failed_driver_and_a_killed_ray_node_each_fail_their_job_and_leave_nothing(
    workdir: Path, tmp_path: Path, kit: Any
) -> None:
    failing = Job(kit, workdir, tmp_path / "failing", "fail")
    killed = Job(kit, workdir, tmp_path / "killed", "hold")
    try:
        found = wait_for_records(killed.records, {"driver", "task0", "task1"})
        tasks = [found[f"task{i}"] for i in range(2)]
        head_group = found["driver"]["pgid"]
        # Ray's workers run in their replica's process group (not one of their own), one node per replica.
        worker_group = next(t["pgid"] for t in tasks if t["pgid"] != head_group)
        assert {t["pgid"] for t in tasks} == {head_group, worker_group}
        assert len({t["node"] for t in tasks}) == 2
        killed_at = time.monotonic()
        os.kill(worker_raylet(kit, worker_group), signal.SIGKILL)
        summary = killed.finish(timeout=90)
        took = time.monotonic() - killed_at
    finally:
        failed = failing.finish(timeout=240)
        if killed.cli.poll() is None:
            killed.finish(timeout=60)

    # The killed node: its replica fails the job, within a minute.
    assert killed.cli.returncode == 1, killed.stdout + killed.stderr
    assert took < 60, f"the job took {took:.0f}s to fail after its Ray node was killed"
    assert summary["error"]["replica"] == "workerpool1-0"
    assert "its Ray node stopped" in last_lines(killed.out, "workerpool1-0", 1)[0]
    assert kit.job_processes({head_group, worker_group, *killed.groups()}, killed.out) == []

    # The failed driver: the job fails on the head, whose last lines are the driver's error.
    assert failing.cli.returncode == 1, failing.stdout + failing.stderr
    assert failed["state"] == "JOB_STATE_FAILED"
    assert failed["error"]["replica"] == "workerpool0-0", failed
    head = last_lines(failing.out, "workerpool0-0")
    assert head[0] == "vertexdist_launcher: workerpool0-0: the Ray driver: ValueError: bad batch 7"
    assert re.fullmatch(
        r"vertexdist_launcher: workerpool0-0 failed: the Ray driver"
        r" `python -m aiplatform_custom_trainer_script\.task \S+ fail` exited with status 1 \(pid \d+\)",
        head[1],
    ), head[1]
    # The worker never reports success for a failed driver: it read the outcome and failed too.
    [worker] = last_lines(failing.out, "workerpool1-0", 1)
    assert worker == (
        "vertexdist_launcher: workerpool1-0 failed: the Ray driver on workerpool0-0 exited with status 1:"
        " ValueError: bad batch 7"
    )
    driver = json.loads((failing.records / "driver.json").read_text())
    assert driver["pgid"] in failing.groups()  # the driver ran in the head replica's process group
    assert kit.job_processes(failing.groups(), failing.out) == []


def test_ctrl_c_and_a_timeout_each_stop_every_ray_node_and_leave_nothing(
    workdir: Path, tmp_path: Path, kit: Any
) -> None:
    cancelled = Job(kit, workdir, tmp_path / "cancelled", "hold")
    # 20 s: mid-start on a loaded machine, or with the driver running on a faster one (it joined at 17 s on
    # 2 cores at load 9); either way `ray start` has begun, so there is a Ray node to stop.
    timed_out = Job(kit, workdir, tmp_path / "timed-out", "hold", "--timeout", "20s")
    try:
        found = wait_for_records(cancelled.records, {"driver", "task0", "task1"})
        cancelled.cli.send_signal(signal.SIGINT)
        cancelled_summary = cancelled.finish(timeout=90)
    finally:
        timed_out_summary = timed_out.finish(timeout=120)
        if cancelled.cli.poll() is None:
            cancelled.finish(timeout=60)

    assert cancelled.cli.returncode == 130, cancelled.stdout + cancelled.stderr
    assert cancelled_summary["state"] == "JOB_STATE_CANCELLED"
    groups = {r["pgid"] for r in found.values()} | cancelled.groups()
    assert len(groups) == 2
    assert kit.job_processes(groups, cancelled.out) == []

    assert timed_out.cli.returncode == 1, timed_out.stdout + timed_out.stderr
    assert timed_out_summary["error"]["message"] == "the job ran past its timeout of 20s"
    assert (timed_out.out / "replicas" / "workerpool0-0" / "ray" / "ray-start.log").is_file()  # Ray started
    assert kit.job_processes(timed_out.groups(), timed_out.out) == []
