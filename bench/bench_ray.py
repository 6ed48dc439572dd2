"""Start-up of a `launcher: ray` job: from the start to the driver's first line, on 2 Ray nodes.

The same small driver (`ray.init()`, then its first line) starts two ways:
  - local-run: the whole CLI (template load, sdist, cached install, ports, replicas, supervision, logs),
    each replica running the shipped vertexdist_launcher, which starts its Ray node (the head on
    workerpool0), waits for both nodes and runs the driver on the head;
  - ray start by hand: `ray start --head`, then `ray start --address HEAD` once the head is up (each
    returns once its node is), then `python driver.py` with RAY_ADDRESS; the very same node settings
    (the launcher's own `ray start` arguments: loopback addresses, 2 CPUs, a small object store).
The driver writes the wall-clock time of its first line; "start -> first line" runs from just before the
launch. The script prints the median of each (and local-run's first, cold-cache run) and the ratio.
Target: local-run / by hand <= 1.2. Runs: BENCH_RAY_REPEATS (default 3) of each, interleaved.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from interleaved import compare, free_port, local_run

from vertexdist.shipped.vertexdist_launcher.cluster import Placement
from vertexdist.shipped.vertexdist_launcher.ray_args import (
    RAY_START,
    RAY_TESTED,
    node_env,
    ray_node,
    ray_start_args,
)

REPEATS = int(os.environ.get("BENCH_RAY_REPEATS", "3"))
# The user's driver: it knows nothing of vertexdist, only Ray.
DRIVER = """\
import json, sys, time
from pathlib import Path
import ray
ray.init()
stamp = time.time()
print("driver: first line", flush=True)
Path(sys.argv[1]).write_text(json.dumps({"first_line": stamp, "nodes": len(ray.nodes())}))
"""


def _first_line(stamp: Path, started: float) -> float:
    data = json.loads(stamp.read_text())
    if data["nodes"] != 2:
        raise SystemExit(f"the driver saw {data['nodes']} Ray nodes, not 2")
    return float(data["first_line"]) - started


def _template(workdir: Path, stamp: Path) -> Path:
    doc = {
        "display_name": "bench-ray",
        "project": "bench-project",
        "staging_bucket": "gs://bench-bucket/staging",
        "container_uri": "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest",
        "machine_type": "n1-standard-4",
        "replica_count": 2,
        "trainer": {
            "script": "driver.py",
            "launcher": "ray",
            "requirements": [RAY_TESTED],
            "args": [str(stamp)],
        },
    }
    path = workdir / f"job-{stamp.stem}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def time_local_run(workdir: Path, run: int) -> float:
    stamp = workdir / f"local-{run}.json"
    started = local_run(_template(workdir, stamp), workdir / f"run-{run}", workdir)
    return _first_line(stamp, started)


def _by_hand_args(rank: int, port: int, folder: Path) -> list[str]:
    """The launcher's own `ray start` arguments for node `rank`, without --block (a person's `ray start`
    returns once its node is up)."""
    place = Placement(f"workerpool{min(rank, 1)}", 0, rank, 2, "127.0.0.1", port)
    node = ray_node(place, {"VERTEXDIST_NPROC_PER_NODE": "1"}, cpus=2, gpus=0, port=port)
    args = ray_start_args(node, free_port=free_port, temp_dir=str(folder))
    return [arg for arg in args if arg != "--block"]


def time_by_hand(workdir: Path, run: int) -> float:
    stamp = workdir / f"hand-{run}.json"
    port = free_port()
    groups: list[int] = []
    folders: list[Path] = []
    env = node_env({**os.environ, "PYTHONUNBUFFERED": "1"})
    started = time.time()
    try:
        for rank in range(2):
            folder = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # short: Ray's socket paths
            folders.append(folder)
            start = subprocess.Popen(
                [sys.executable, *RAY_START, *_by_hand_args(rank, port, folder)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,  # its node stays in this group after `ray start` returns
            )
            groups.append(start.pid)
            out, _ = start.communicate()
            if start.returncode != 0:
                raise SystemExit(f"ray start failed:\n{out[-3000:]}")
        driver = subprocess.run(
            [sys.executable, str(workdir / "driver.py"), str(stamp)],
            env={**env, "RAY_ADDRESS": f"127.0.0.2:{port}"},
            capture_output=True,
            text=True,
        )
        if driver.returncode != 0:
            raise SystemExit(f"the driver failed:\n{driver.stdout[-2000:]}\n{driver.stderr[-2000:]}")
        return _first_line(stamp, started)
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):  # never `ray stop`: it stops other jobs' Ray too
            for group in groups:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, sig)
            time.sleep(3)
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    try:
        (workdir / "driver.py").write_text(DRIVER)
        compare(
            "job: a Ray driver on 2 Ray nodes (2 CPUs each, loopback); start -> the driver's first line",
            ("local-run", lambda run: time_local_run(workdir, run)),
            ("ray start by hand", lambda run: time_by_hand(workdir, run)),
            repeats=REPEATS,
            target=1.2,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
