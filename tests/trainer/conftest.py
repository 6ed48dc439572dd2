"""Helpers that start trainer replicas as Vertex does: one process per node, each with its CLUSTER_SPEC."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from vertexdist.local.procs import group_members

REPO_ROOT = Path(__file__).resolve().parents[2]
RDZV_TIMEOUT = "20"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cluster_spec(pools: dict[str, int], task_type: str, index: int, ports: dict[str, list[int]]) -> str:
    cluster = {pool: [f"127.0.0.1:{port}" for port in ports[pool][:count]] for pool, count in pools.items()}
    return json.dumps(
        {
            "cluster": cluster,
            "environment": "cloud",
            "task": {"type": task_type, "index": index, "trial": ""},
            "job": json.dumps({"python_module": "trainer_pkg.task", "package_uris": [], "job_args": []}),
        }
    )


def clean_env() -> dict[str, str]:
    """The test process's environment without anything a launcher would set for a replica."""
    drop = {"CLUSTER_SPEC", "TF_CONFIG", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("AIP_", "VERTEXDIST_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    return env


@dataclass
class Job:
    """A local stand-in for one Vertex job: N training nodes sharing one bucket root."""

    root: Path
    nodes: int = 2
    nproc: int = 2
    bucket_prefix: str = "gs://bucket/job"
    ports: dict[str, list[int]] = field(default_factory=dict)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ports = {
            "workerpool0": [free_port()],
            "workerpool1": [free_port() for _ in range(self.nodes - 1)],
        }

    @property
    def model_dir(self) -> Path:
        return self.root / "gcs" / "bucket" / "job" / "model"

    @property
    def checkpoint_dir(self) -> Path:
        return self.root / "gcs" / "bucket" / "job" / "checkpoints"

    def env(self, node: int) -> dict[str, str]:
        pools = {"workerpool0": 1}
        if self.nodes > 1:
            pools["workerpool1"] = self.nodes - 1
        task_type, index = ("workerpool0", 0) if node == 0 else ("workerpool1", node - 1)
        env = clean_env()
        env.update(
            CLUSTER_SPEC=cluster_spec(pools, task_type, index, self.ports),
            AIP_MODEL_DIR=f"{self.bucket_prefix}/model/",
            AIP_CHECKPOINT_DIR=f"{self.bucket_prefix}/checkpoints/",
            VERTEXDIST_GCS_ROOT=str(self.root / "gcs"),
            VERTEXDIST_NPROC_PER_NODE=str(self.nproc),
        )
        if self.nodes > 1:
            env.update(
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(self.ports["workerpool0"][0]),
                WORLD_SIZE=str(self.nodes),
                RANK=str(node),
            )
        return env

    def start(self, node: int, args: list[str], **extra_env: str) -> subprocess.Popen[bytes]:
        log = (self.root / f"node{node}.log").open("ab")
        process = subprocess.Popen(
            [sys.executable, "-m", "trainer_pkg.task", *args],
            env={**self.env(node), **extra_env},
            cwd=self.root,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # like a local launcher: each replica leads its own process group
        )
        self.processes.append(process)
        return process

    def start_all(self, args: list[str]) -> list[subprocess.Popen[bytes]]:
        return [self.start(node, args) for node in range(self.nodes)]

    def log(self, node: int) -> str:
        return (self.root / f"node{node}.log").read_text()

    def metrics(self) -> list[dict[str, object]]:
        lines = (self.model_dir / "metrics.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]

    def run(self, args: list[str], timeout: float = 90) -> list[int]:
        processes = self.start_all(args)
        return [wait(p, timeout) for p in processes]


def wait(process: subprocess.Popen[bytes], timeout: float) -> int:
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(process)
        raise


def kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def group_gone(pgid: int, within: float = 5.0) -> bool:
    """True once no live process of the group is left (no orphaned workers)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not group_members(pgid):
            return True
        time.sleep(0.05)
    return False


def wait_for(condition: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within} s waiting for {what}")
        time.sleep(0.01)


def listeners(pids: set[int]) -> list[str]:
    """The local addresses `pids` listen on, as /proc/net/tcp{,6} write them (0100007F:PORT: 127.0.0.1)."""
    inodes = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.append(fields[1])
    return found


class Kit:
    """The helpers above, as one fixture (importlib import mode keeps conftest out of reach of imports)."""

    Job = Job
    clean_env = staticmethod(clean_env)
    free_port = staticmethod(free_port)
    wait = staticmethod(wait)
    kill_group = staticmethod(kill_group)
    group_members = staticmethod(group_members)
    group_gone = staticmethod(group_gone)
    wait_for = staticmethod(wait_for)
    listeners = staticmethod(listeners)

    @staticmethod
    def run_module(
        module: str, env: dict[str, str], *args: str, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", module, *args],
            env={**clean_env(), **env},
            capture_output=True,
            text=True,
            timeout=120,
            cwd=cwd,
        )


@pytest.fixture(scope="session")
def kit() -> type[Kit]:
    return Kit


@pytest.fixture
def make_job(tmp_path: Path) -> Iterator[Callable[..., Job]]:
    started: list[Job] = []

    def make(name: str = "job", **kwargs: int) -> Job:
        root = tmp_path / name
        root.mkdir()
        job = Job(root, **kwargs)
        started.append(job)
        return job

    yield make
    for job in started:
        for process in job.processes:
            if process.poll() is None:
                kill_group(process)
