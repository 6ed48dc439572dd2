"""Shared helpers for the local backend's tests: CustomJobSpec builders and process-liveness checks."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from vertexdist.local.procs import group_members

STANDIN = Path(__file__).with_name("standin_replica.py")
REDUCTION_IMAGE = "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"


def container_pool(
    replicas: int, args: Sequence[str], *, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """A training pool running the stand-in replica on the host (containerSpec command + args)."""
    return {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": replicas,
        "containerSpec": {
            "imageUri": "example.com/standin:latest",
            "command": [sys.executable, str(STANDIN)],
            "args": list(args),
            "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
        },
    }


def reduction_pool(replicas: int) -> dict[str, Any]:
    return {
        "machineSpec": {"machineType": "n1-highcpu-16"},
        "replicaCount": replicas,
        "containerSpec": {"imageUri": REDUCTION_IMAGE},
    }


def standin_spec(
    record: Path, *, workers: int = 1, reducers: int = 0, extra: Sequence[str] = (), **scheduling: Any
) -> dict[str, Any]:
    args = ["--record", str(record), *extra]
    pools: list[dict[str, Any]] = [container_pool(1, args)]
    if workers or reducers:
        pools.append(container_pool(workers, args) if workers else {})
    if reducers:
        pools.append(reduction_pool(reducers))
    spec: dict[str, Any] = {
        "workerPoolSpecs": pools,
        "baseOutputDirectory": {"outputUriPrefix": "gs://test-bucket/out"},
    }
    if scheduling:
        spec["scheduling"] = scheduling
    return spec


def process_alive(pid: int) -> bool:
    """True while `pid` is a live process (a zombie waiting to be reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat[stat.rfind(")") + 2] != "Z"


def records(record_dir: Path) -> dict[str, dict[str, Any]]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(record_dir.glob("*.json"))}


def wait_for(predicate: Any, timeout: float = 20.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def assert_no_orphans(recorded: dict[str, dict[str, Any]], extra_pids: Sequence[int] = ()) -> None:
    """Every replica process, every worker it spawned, and every process group of the job are gone."""
    assert recorded, "no replica recorded itself; the test proves nothing"
    pids = [int(r["pid"]) for r in recorded.values()]
    pids += [int(p) for r in recorded.values() for p in r["worker_pids"]]
    pids += list(extra_pids)
    alive = [pid for pid in pids if process_alive(pid)]
    assert not alive, f"processes left running: {alive}"
    groups = {int(r["pgid"]) for r in recorded.values()}
    leftover = {pgid: group_members(pgid) for pgid in groups if group_members(pgid)}
    assert not leftover, f"process groups left: {leftover}"


def proc_stat(pid: int) -> tuple[int, int] | None:
    """(process group, session) of a live, non-zombie process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    return None if fields[0] == "Z" else (int(fields[2]), int(fields[3]))


def job_processes(groups: set[int], run_dir: Path) -> list[str]:
    """Live processes in one of `groups` as process group or session, or naming the run folder: what a
    job whose replicas led those groups left running (Ray's daemons and workers included)."""
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


def replica_groups(run_dir: Path) -> set[int]:
    """The process groups of a finished local job's replicas (each replica leads its own)."""
    summary = json.loads((run_dir / "summary.json").read_text())
    return {int(r["pid"]) for r in summary["replicas"] if r["pid"] is not None}


@pytest.fixture
def record_dir(tmp_path: Path) -> Path:
    path = tmp_path / "records"
    path.mkdir()
    return path


class Kit:
    """The helpers above, handed to tests as a fixture (tests run with --import-mode=importlib)."""

    STANDIN = STANDIN
    container_pool = staticmethod(container_pool)
    reduction_pool = staticmethod(reduction_pool)
    standin_spec = staticmethod(standin_spec)
    process_alive = staticmethod(process_alive)
    group_members = staticmethod(group_members)
    records = staticmethod(records)
    wait_for = staticmethod(wait_for)
    assert_no_orphans = staticmethod(assert_no_orphans)
    proc_stat = staticmethod(proc_stat)
    job_processes = staticmethod(job_processes)
    replica_groups = staticmethod(replica_groups)


@pytest.fixture
def kit() -> type[Kit]:
    return Kit
