"""`vertexdist emulator start --warm N`: a job's replicas forked from the emulator's own warm pool get what a
cold start gives them (environment, folder, logs, exit status), and an emulator that is killed leaves no pool
and no replica behind."""

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

from vertexdist.emulator import Emulator
from vertexdist.local.warm_pool import ping

pytestmark = [pytest.mark.integration, pytest.mark.slow]
COLD = "starting this replica cold"

# The chief records itself and waits; the worker records itself, writes on both streams and exits 3.
RECORDER = """
import json, os, sys, time
task = json.loads(os.environ["CLUSTER_SPEC"])["task"]
name = f"{task['type']}-{task['index']}"
record = {
    "env": sorted(os.environ), "cwd": os.getcwd(), "argv0": sys.argv[0], "args": sys.argv[1:],
    "main": __name__, "pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0),
    "job": os.environ["CLOUD_ML_JOB_ID"], "path0": sys.path[0],
}
folder = os.path.join(os.environ["RECORDS"], record["job"])
os.makedirs(folder, exist_ok=True)
with open(os.path.join(folder, name + ".json"), "w") as out:
    json.dump(record, out)
print(f"out from {name}", flush=True)
print(f"err from {name}", file=sys.stderr, flush=True)
if name == "workerpool0-0":
    time.sleep(float(os.environ.get("CHIEF_SLEEP", "30")))
else:
    sys.exit(3)
"""


def _submit(cli: Any, emu: Emulator, path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    monkeypatch.setenv("VERTEX_API_ENDPOINT", emu.vertex_endpoint)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emu.storage_endpoint)
    code, out, err = cli("submit", str(path), "--yes")
    return code, out.splitlines()[0] if out else "", err


def _records(folder: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*/*.json"))}


def _relative(record: dict[str, Any], data_dir: Path) -> dict[str, Any]:
    """What must be equal between a cold and a warm start: paths relative to the emulator's data folder."""
    job = record["job"]
    return {
        "env": record["env"],
        "cwd": record["cwd"].replace(str(data_dir), "DATA").replace(job, "JOB"),
        "argv0": record["argv0"].replace(str(data_dir), "DATA"),
        "args": record["args"],
        "main": record["main"],
        "own_group": record["pgid"] == record["pid"],
        "path0": record["path0"].replace(str(data_dir), "DATA").replace(job, "JOB"),
    }


def test_a_warm_replica_gets_a_cold_ones_environment_folder_logs_and_exit_status(
    emu: Emulator,
    warm_emulator: Emulator,
    cli: Any,
    write_template: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    records = {"cold": tmp_path / "cold", "warm": tmp_path / "warm"}
    seen: dict[str, Any] = {}
    for mode, server in (("cold", emu), ("warm", warm_emulator)):
        path = write_template(RECORDER, name="warm-same", replicas=2, env={"RECORDS": str(records[mode])})
        code, name, err = _submit(cli, server, path, monkeypatch)
        assert code == 1, err  # the worker's exit 3 fails the job
        job = server.store.get(name)
        assert job is not None and job["state"] == "PIPELINE_STATE_FAILED"
        assert server.data_dir is not None
        got = _records(records[mode])
        assert set(got) == {"workerpool0-0", "workerpool1-0"}, got
        seen[mode] = {
            "error": job["error"]["message"].split("\n")[0],
            "records": {k: _relative(v, server.data_dir) for k, v in got.items()},
            "raw": got,
            "logs": {
                log.name.removesuffix(".log"): log.read_text()
                for log in (server.data_dir / "jobs" / next(iter(got.values()))["job"] / "logs").glob("*.log")
            },
        }
    cold, warm = seen["cold"], seen["warm"]
    assert "exited with a non-zero status of 3" in warm["error"] and warm["error"] == cold["error"]
    assert warm["records"] == cold["records"]
    assert warm_emulator.warm_pool is not None
    pool_pid = warm_emulator.warm_pool.pid
    assert {r["ppid"] for r in warm["raw"].values()} == {pool_pid}  # forked by the pool, not started
    assert pool_pid not in {r["ppid"] for r in cold["raw"].values()}
    assert set(warm["logs"]) == set(cold["logs"]) == {"workerpool0-0", "workerpool1-0"}
    for replica, text in warm["logs"].items():
        assert COLD not in text
        for line in (f"out from {replica}", f"err from {replica}"):
            assert line in text and line in cold["logs"][replica], (replica, text[-500:])
    answer = ping(warm_emulator.warm_pool.path)
    assert answer is not None and answer["cuda_initialized"] is False
    assert len(answer["ready"]) == 2  # the pool forked new ready children for the ones it used


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def test_a_killed_emulator_leaves_no_pool_and_no_replica(
    tmp_path: Path, cli: Any, write_template: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "emulator", "start", "--data-dir", str(data), "--warm", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_GCE_CHECK": "true"},
    )
    pids: list[int] = []
    try:
        assert proc.stdout is not None and proc.stderr is not None
        vertex = proc.stdout.readline().strip().split("=", 1)[1]
        storage = proc.stdout.readline().strip().split("=", 1)[1]
        lines = [proc.stderr.readline(), proc.stderr.readline()]
        pool_line = next(line for line in lines if line.startswith("warm pool: pid "))
        pool_pid = int(pool_line.split()[3].rstrip(","))
        socket = Path(_pool_socket(pool_pid))
        answer = ping(socket)
        assert answer is not None and answer["pid"] == pool_pid and len(answer["ready"]) == 1
        pids = [pool_pid, *answer["ready"]]
        monkeypatch.setenv("VERTEX_API_ENDPOINT", vertex)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", storage)
        records = tmp_path / "records"
        path = write_template(RECORDER, name="warm-killed", replicas=1, env={"RECORDS": str(records)})
        code, _out, err = cli("submit", str(path), "--detach")
        assert code == 0, err
        deadline = time.monotonic() + 60
        while "workerpool0-0" not in _records(records):
            assert time.monotonic() < deadline, "the chief never started"
            time.sleep(0.1)
        chief = _records(records)["workerpool0-0"]
        assert chief["ppid"] == pool_pid
        pids.append(chief["pid"])
        again = ping(socket)
        assert again is not None and chief["pid"] not in again["ready"]
        pids += again["ready"]  # the one forked ahead in the chief's place
        proc.kill()
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in pids):
            assert time.monotonic() < deadline, [pid for pid in pids if _alive(pid)]
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _pool_socket(pid: int) -> str:
    """The unix socket the pool `pid` listens on, read from its command line."""
    words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return words[words.index(b"--socket") + 1].decode()
