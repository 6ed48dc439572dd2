"""Launch overhead of `vertexdist local-run` against starting the same replicas by hand with torchrun.

The same short DDP job (bundled trainer, 2 replicas x 1 process, gloo on CPU) runs three ways:
  - local-run: the whole CLI (template load, sdist, cached install, ports, replicas, supervision, logs);
  - torchrun by hand: two `torchrun --rdzv-backend=static` launchers (node rank 0 and 1) on one port;
and the script prints the median wall time of each (and local-run's first, cold-cache run) and the ratio.
Target: local-run / torchrun <= 1.0.

`--warm`: local-run with `--warm`, its pool (`vertexdist.local.warm_pool`, on a socket of the bench's own)
started before the timed runs and stopped after; target <= 0.5.
"""

from __future__ import annotations

import argparse
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

REPEATS = 3
TRAINER_ARGS = [
    "--epochs=1",
    "--samples=256",
    "--batch-size=32",
    "--data=synthetic",
    "--seed=0",
    "--rdzv-timeout=60",
]
TEMPLATE = {
    "display_name": "bench-local-run",
    "project": "bench-project",
    "staging_bucket": "gs://bench-bucket/staging",
    "trainer": {"args": TRAINER_ARGS, "env": {"OMP_NUM_THREADS": "1"}},
    "replica_count": 2,
}


def time_local_run(workdir: Path, template: Path, run: int, warm: bool = False) -> float:
    flags = ("--procs-per-replica", "1", *(("--warm",) if warm else ()))
    started = local_run(template, workdir / f"run-{run}", workdir, *flags)
    return time.time() - started


def time_torchrun(workdir: Path, run: int) -> float:
    port = free_port()
    model_dir = workdir / f"torchrun-{run}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "AIP_MODEL_DIR": str(model_dir / "model")}
    env["AIP_CHECKPOINT_DIR"] = str(model_dir / "checkpoints")
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes=2",
                f"--node-rank={rank}",
                "--nproc-per-node=1",
                "--rdzv-backend=static",
                "--master-addr=127.0.0.1",
                f"--master-port={port}",
                "-m",
                "trainer_pkg.task",
                *TRAINER_ARGS,
            ],
            cwd=workdir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(2)
    ]
    outputs = [proc.communicate()[0] for proc in procs]
    elapsed = time.perf_counter() - started
    if any(proc.returncode for proc in procs):
        raise SystemExit("torchrun failed:\n" + "\n".join(out[-2000:] for out in outputs))
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warm", action="store_true", help="local-run --warm, its pool started first")
    warm = parser.parse_args().warm
    workdir = Path(tempfile.mkdtemp(prefix="bench-local-run-"))
    pool_pid = None
    try:
        template = workdir / "job.yaml"
        template.write_text(yaml.safe_dump(TEMPLATE))
        if warm:
            from vertexdist.local.warm_pool import SOCKET_VARIABLE, start_pool

            socket = workdir / "pool.sock"
            os.environ[SOCKET_VARIABLE] = str(socket)
            pool_pid = start_pool(socket, idle_s=600)
        name = "local-run --warm" if warm else "local-run"
        compare(
            "job: bundled trainer, 2 replicas x 1 process, gloo/CPU, 1 epoch of 256 samples",
            (name, lambda run: time_local_run(workdir, template, run, warm)),
            ("torchrun", lambda run: time_torchrun(workdir, run)),
            repeats=REPEATS,
            target=0.5 if warm else 1.0,
        )
    finally:
        if pool_pid is not None:
            os.kill(pool_pid, signal.SIGTERM)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
