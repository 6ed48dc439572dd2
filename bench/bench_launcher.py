"""Launch overhead of `launcher: torchrun` for a user's own script: start -> first training step.

The same small DDP script (gloo on CPU, 2 replicas x 2 processes) starts two ways:
  - local-run: the whole CLI (template load, sdist, cached install, ports, replicas, supervision, logs),
    each replica running the shipped vertexdist_launcher, which runs torchrun over the script;
  - torchrun by hand: two `python -m torch.distributed.run` processes (node rank 0 and 1, static
    rendezvous on one port), each with 2 processes per node, over the very same script file.
Each rank writes the wall-clock time its first optimizer step ended; "start -> first step" runs from just
before the launch to the last rank's first step. The script prints the median of each (and local-run's
first, cold-cache run) and the ratio. Target: local-run / torchrun <= 1.1.

`--warm`: local-run with `--warm`, its pool (on a socket of the bench's own) started before the timed runs:
the replicas are forked from it, and so are torchrun's workers (the launcher's fork server,
`vertexdist_launcher/worker_fork.py`). Target <= 0.7.
"""

from __future__ import annotations

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
# Barrier, then destroy (docs/launchers/torchrun.md, "Ending a script safely"): without the barrier a rank
# died of SIGABRT ("terminate called without an active exception") around destroy_process_group() in 2 of
# 2 runs of this benchmark on a busy machine (issue 27): gloo's teardown racing a peer still communicating.
dist.barrier()
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


def time_local_run(workdir: Path, run: int, warm: bool = False) -> float:
    stamps = workdir / f"local-{run}"
    stamps.mkdir()
    flags = ("--procs-per-replica", "2", *(("--warm",) if warm else ()))
    started = local_run(_template(workdir, stamps), workdir / f"run-{run}", workdir, *flags)
    if warm:
        logs = (workdir / f"run-{run}" / "logs").glob("*.log")
        if any("starting this replica cold" in log.read_text() for log in logs):
            raise SystemExit(f"a replica of run {run} started cold")
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
    warm = "--warm" in sys.argv[1:]
    workdir = Path(tempfile.mkdtemp(prefix="bench-launcher-"))
    pool_pid = start_warm_pool(workdir) if warm else None
    try:
        (workdir / "user_script.py").write_text(SCRIPT)
        compare(
            "job: a user's DDP script, 2 replicas x 2 processes, gloo/CPU; start -> last rank's first step",
            ("local-run --warm" if warm else "local-run", lambda run: time_local_run(workdir, run, warm)),
            ("torchrun", lambda run: time_torchrun(workdir, run)),
            repeats=REPEATS,
            target=0.7 if warm else 1.1,
        )
    finally:
        if pool_pid is not None:
            os.kill(pool_pid, signal.SIGTERM)
        shutil.rmtree(workdir, ignore_errors=True)


def start_warm_pool(workdir: Path) -> int:
    """`--warm`: the pool, on a socket of this bench's own (local-run finds it there), started first."""
    from vertexdist.local.warm_pool import SOCKET_VARIABLE, start_pool

    os.environ[SOCKET_VARIABLE] = str(workdir / "pool.sock")
    return start_pool(workdir / "pool.sock", idle_s=600)


if __name__ == "__main__":
    main()
