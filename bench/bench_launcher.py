"""Launch overhead of `launcher: torchrun` for a user's own script: start -> first training step.

The same small DDP script (gloo on CPU, 2 replicas x 2 processes) starts two ways:
  - local-run: the whole CLI (template load, sdist, cached install, ports, replicas, supervision, logs),
    each replica running the shipped vertexdist_launcher, which runs torchrun over the script;
  - torchrun by hand: two `python -m torch.distributed.run` processes (node rank 0 and 1, static
    rendezvous on one port), each with 2 processes per node, over the very same script file.
Each rank writes the wall-clock time its first optimizer step ended; "start -> first step" runs from just
before the launch to the last rank's first step. The script prints the median of each (and local-run's
first, cold-cache run) and the ratio. Target: local-run / torchrun <= 1.1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from interleaved import compare, free_port, local_run

REPEATS = 5
# The user's script: it knows nothing of vertexdist, only torchrun's variables.
SCRIPT = """\
import json, os, sys, time
from pathlib import Path
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
x, y = torch.randn(64, 16), torch.randn(64, 1)
for step in range(3):
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
    if step == 0:
        stamp = {"rank": dist.get_rank(), "first_step": time.time()}
        Path(sys.argv[1], f"rank{dist.get_rank()}.json").write_text(json.dumps(stamp))
dist.destroy_process_group()
"""


def _first_step(stamps: Path, started: float) -> float:
    found = [json.loads(p.read_text()) for p in stamps.glob("rank*.json")]
    if len(found) != 4:
        raise SystemExit(f"{len(found)} of 4 ranks recorded a first step in {stamps}")
    return max(s["first_step"] for s in found) - started


def _template(workdir: Path, stamps: Path) -> Path:
    doc = {
        "display_name": "bench-launcher",
        "project": "bench-project",
        "staging_bucket": "gs://bench-bucket/staging",
        "container_uri": "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest",
        "machine_type": "n1-standard-4",
        "replica_count": 2,
        "trainer": {"script": "user_script.py", "launcher": "torchrun", "args": [str(stamps)]},
    }
    path = workdir / f"job-{stamps.name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def time_local_run(workdir: Path, run: int) -> float:
    stamps = workdir / f"local-{run}"
    stamps.mkdir()
    started = local_run(
        _template(workdir, stamps), workdir / f"run-{run}", workdir, "--procs-per-replica", "2"
    )
    return _first_step(stamps, started)


def time_torchrun(workdir: Path, run: int) -> float:
    stamps = workdir / f"torchrun-{run}"
    stamps.mkdir()
    port = free_port()
    started = time.time()
    procs = [
        subprocess.Popen(
            [
                *(sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node-rank={rank}"),
                *("--nproc-per-node=2", "--master-addr=127.0.0.1", f"--master-port={port}"),
                *(str(workdir / "user_script.py"), str(stamps)),
            ],
            cwd=workdir,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(2)
    ]
    outputs = [proc.communicate()[0] for proc in procs]
    if any(proc.returncode for proc in procs):
        raise SystemExit("torchrun failed:\n" + "\n".join(out[-2000:] for out in outputs))
    return _first_step(stamps, started)


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bench-launcher-"))
    try:
        (workdir / "user_script.py").write_text(SCRIPT)
        compare(
            "job: a user's DDP script, 2 replicas x 2 processes, gloo/CPU; start -> last rank's first step",
            ("local-run", lambda run: time_local_run(workdir, run)),
            ("torchrun", lambda run: time_torchrun(workdir, run)),
            repeats=REPEATS,
            target=1.1,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
