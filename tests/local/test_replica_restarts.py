"""Vertex's restart rules with real replica processes (docs/reference/vertex.md §8.1, `local.exits`): a
replica the platform stopped is restarted alone and the job goes on; past 5 restarts the whole job is
retried; an ordinary exception still ends the job within seconds; disableRetries turns restarts off.

Each runs cold (`start_job`, as the emulator starts a job) and warm (local-run's path, every start and
restart forked from the session's warm pool: `replica_start`, tests/conftest.py)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from vertexdist.backends.base import JobEvent, ReplicaState
from vertexdist.backends.local.backend import summary_of
from vertexdist.cli.local_report import summary_lines
from vertexdist.local import JobContext, JobState

pytestmark = pytest.mark.integration

# One replica's script: counts its starts in <dir>/<replica>.starts, then does what its start's rule says:
# `exit:N` exits N, `sleep` sleeps until stopped, `link` plays gloo (the chief fails at once, "Connection
# closed by peer", when the worker holding its connection dies), anything else exits 0. Rules are given per
# start, comma-separated; the last one holds for every later start.
SCRIPT = """\
import json, os, socket, sys, time
from pathlib import Path
spec = json.loads(os.environ["CLUSTER_SPEC"])
name = f"{spec['task']['type']}-{spec['task']['index']}"
out = Path(sys.argv[1])
counter = out / f"{name}.starts"
starts = len(counter.read_text()) if counter.exists() else 0
counter.write_text("x" * (starts + 1))
rules = dict(arg.split("=", 1) for arg in sys.argv[2:])
plan = rules.get(name, "ok").split(",")
rule = plan[min(starts, len(plan) - 1)]
print(f"{name} start {starts + 1}: {rule}", flush=True)
if rule.startswith("exit:"):
    sys.exit(int(rule[5:]))
if rule == "sleep":
    (out / f"{name}.ready").write_text(str(os.getpid()))
    time.sleep(60)
if rule == "link":
    host, port = spec["cluster"]["workerpool0"][0].rsplit(":", 1)
    if name == "workerpool0-0":
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, int(port)))
        listener.listen()
        (out / f"{name}.ready").write_text(str(os.getpid()))
        peer, _ = listener.accept()
        peer.recv(1)
        print("RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer", flush=True)
        sys.exit(1)
    for _ in range(400):
        try:
            sock = socket.create_connection((host, int(port)))
            break
        except OSError:
            time.sleep(0.025)
    (out / f"{name}.ready").write_text(str(os.getpid()))
    time.sleep(60)
time.sleep(0.2)
print(f"{name} done", flush=True)
"""


def _pool(script: Path, out: Path, rules: dict[str, str], replicas: int = 1) -> dict[str, Any]:
    return {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": replicas,
        "containerSpec": {
            "imageUri": "example.com/restarts:latest",
            "command": [sys.executable, str(script)],
            "args": [str(out), *(f"{k}={v}" for k, v in rules.items())],
        },
    }


def _start(
    replica_start: Any, tmp_path: Path, rules: dict[str, str], *, workers: int = 0, **scheduling: Any
) -> tuple[Any, list[JobEvent]]:
    script = tmp_path / "replica.py"
    script.write_text(SCRIPT)
    out = tmp_path / "out"
    out.mkdir()
    pools = [_pool(script, out, rules)]
    if workers:
        pools.append(_pool(script, out, rules, workers))
    spec: dict[str, Any] = {"workerPoolSpecs": pools}
    if scheduling:
        spec["scheduling"] = scheduling
    run_dir = tmp_path / "run"
    ctx = JobContext(job_id="r", project="p", region="us-central1", gcs_root=str(run_dir / "gcs"))
    events: list[JobEvent] = []

    def no_packages(uri: str) -> Path:
        raise AssertionError(uri)

    job = replica_start.start_job(
        spec, ctx, run_dir=run_dir, fetch_package=no_packages, grace_s=2.0, on_event=events.append
    )
    return job, events


def _messages(events: list[JobEvent]) -> list[str]:
    return [e.message for e in events if e.replica is None and e.message]


def _restarts(result: Any) -> dict[str, int]:
    return {r.name: r.restarts for r in result.replicas}


def _wait_ready(tmp_path: Path, name: str, timeout: float = 30.0) -> int:
    ready = tmp_path / "out" / f"{name}.ready"
    deadline = time.monotonic() + timeout
    while not ready.exists():
        assert time.monotonic() < deadline, f"{name} never got ready"
        time.sleep(0.02)
    return int(ready.read_text())


def _stop_as_the_platform(job: Any, name: str) -> None:
    """What a maintenance event does to the replica: the job is told, then SIGTERM to its process group."""
    pid = next(r.pid for r in job.replicas() if r.name == name)
    assert job.stopped_by_platform(name, pid, "was stopped by a maintenance event (test)")
    os.killpg(pid, signal.SIGTERM)


def test_a_replica_the_platform_stopped_is_restarted_alone_and_the_job_succeeds(
    tmp_path: Path, replica_start: Any
) -> None:
    job, events = _start(
        replica_start, tmp_path, {"workerpool1-0": "sleep,ok", "workerpool0-0": "ok"}, workers=1
    )
    _wait_ready(tmp_path, "workerpool1-0")
    chief_pid = next(r.pid for r in job.replicas() if r.name == "workerpool0-0")
    _stop_as_the_platform(job, "workerpool1-0")
    result = job.wait(60)
    assert result is not None and result.state is JobState.SUCCEEDED, (result, _messages(events))
    assert result.restarts == 0 and _restarts(result) == {"workerpool0-0": 0, "workerpool1-0": 1}
    assert [m for m in _messages(events) if m.startswith("restarting")] == [
        "restarting workerpool1-0 (1/5): The replica workerpool1-0 was stopped by a maintenance event (test)."
    ]
    # Only that replica ran again: same log file, a marker line between its runs; the chief ran once.
    log = job.log_paths()["workerpool1-0"].read_text()
    assert log.count("workerpool1-0 start") == 2 and "vertexdist: replica restart workerpool1-0 (1/5)" in log
    assert (tmp_path / "out" / "workerpool0-0.starts").read_text() == "x"
    assert next(r.pid for r in result.replicas if r.name == "workerpool0-0") == chief_pid
    stopped = [e.replica for e in events if e.replica is not None and e.replica.state is ReplicaState.STOPPED]
    assert [r.name for r in stopped if r is not None] == ["workerpool1-0"]
    summary = summary_of("r", "d", tmp_path / "run", result)
    assert {r["name"]: r["restarts"] for r in summary["replicas"]} == _restarts(result)
    assert "replicas restarted: workerpool1-0 (1)" in summary_lines(result, tmp_path / "run")


def test_a_peer_that_only_lost_the_stopped_replica_is_restarted_with_it(
    tmp_path: Path, replica_start: Any
) -> None:
    job, events = _start(
        replica_start, tmp_path, {"workerpool0-0": "link,ok", "workerpool1-0": "link,ok"}, workers=1
    )
    _wait_ready(tmp_path, "workerpool0-0")
    _wait_ready(tmp_path, "workerpool1-0")
    _stop_as_the_platform(job, "workerpool1-0")
    result = job.wait(60)
    assert result is not None and result.state is JobState.SUCCEEDED, (result, _messages(events))
    assert _restarts(result) == {"workerpool0-0": 1, "workerpool1-0": 1}


def test_a_replica_past_five_restarts_retries_the_whole_job(tmp_path: Path, replica_start: Any) -> None:
    # Starts 1-6 of the chief exit 75 (EX_TEMPFAIL: not permanent); the 7th, in the job's retry, succeeds.
    job, events = _start(
        replica_start, tmp_path, {"workerpool0-0": "exit:75,exit:75,exit:75,exit:75,exit:75,exit:75,ok"}
    )
    result = job.wait(90)
    assert result is not None and result.state is JobState.SUCCEEDED, (result, _messages(events))
    assert result.restarts == 1 and _restarts(result) == {"workerpool0-0": 5}
    messages = _messages(events)
    assert [m.split(":")[0] for m in messages if m.startswith("restarting")] == [
        f"restarting workerpool0-0 ({n}/5)" for n in range(1, 6)
    ]
    retry = "retrying the job (1/3): The replica workerpool0-0 exited with a non-zero status of 75"
    assert f"{retry}, after 5 restarts." in messages
    assert [r.attempt for r in result.replicas] == [1]


def test_the_job_fails_once_its_retries_are_spent(tmp_path: Path, replica_start: Any) -> None:
    job, _ = _start(replica_start, tmp_path, {"workerpool0-0": "exit:75"})
    result = job.wait(120)
    assert result is not None and result.state is JobState.FAILED
    assert result.restarts == 3 and _restarts(result) == {"workerpool0-0": 20}
    assert result.error.message.endswith("status of 75, after 5 restarts.")
    assert (tmp_path / "out" / "workerpool0-0.starts").read_text() == "x" * 24  # 6 runs in each of 4 attempts


def test_an_ordinary_exception_still_ends_the_job_within_seconds(tmp_path: Path, replica_start: Any) -> None:
    started = time.monotonic()
    job, events = _start(
        replica_start, tmp_path, {"workerpool0-0": "sleep", "workerpool1-0": "exit:1"}, workers=1
    )
    result = job.wait(30)
    assert result is not None and result.state is JobState.FAILED
    assert result.error.replica == "workerpool1-0" and result.error.exit_code == 1
    assert time.monotonic() - started < 15
    assert result.restarts == 0 and _restarts(result) == {"workerpool0-0": 0, "workerpool1-0": 0}
    assert not [m for m in _messages(events) if "restarting" in m or "retrying" in m]


def test_disable_retries_turns_restarts_off(tmp_path: Path, replica_start: Any) -> None:
    job, _ = _start(replica_start, tmp_path, {"workerpool0-0": "exit:75,ok"}, disableRetries=True)
    result = job.wait(30)
    assert result is not None and result.state is JobState.FAILED
    assert result.error.exit_code == 75 and result.restarts == 0 and _restarts(result) == {"workerpool0-0": 0}
    assert (tmp_path / "out" / "workerpool0-0.starts").read_text() == "x"


def test_restart_job_on_worker_restart_restarts_every_replica_when_the_platform_stops_one(
    tmp_path: Path, replica_start: Any
) -> None:
    job, events = _start(
        replica_start,
        tmp_path,
        {"workerpool0-0": "sleep,ok", "workerpool1-0": "sleep,ok"},
        workers=1,
        restartJobOnWorkerRestart=True,
    )
    _wait_ready(tmp_path, "workerpool0-0")
    _wait_ready(tmp_path, "workerpool1-0")
    _stop_as_the_platform(job, "workerpool1-0")
    result = job.wait(60)
    assert result is not None and result.state is JobState.SUCCEEDED, (result, _messages(events))
    assert result.restarts == 1 and _restarts(result) == {"workerpool0-0": 0, "workerpool1-0": 0}
    assert json.loads(json.dumps([r.attempt for r in result.replicas])) == [1, 1]
