"""Launch overhead of `launcher: torchrun` for a user's own script: start -> first training step.

The same small DDP script (gloo on CPU, 2 replicas x 2 processes) starts two ways:
  - local-run: the whole CLI (template load, sdist, cached install, ports, replicas, supervision, logs),
    each replica running the shipped vertexdist_launcher, which runs torchrun over the script;
  - torchrun by hand: two `python -m torch.distributed.run` processes (node rank 0 and 1, static
    rendezvous on one port), each with 2 processes per node, over the very same script file.
Each rank writes the wall-clock time its first optimizer step ended; "start -> first step" runs from just
before the launch to the last rank's first step. The script prints the median of each (and local-run's
first, cold-cache run) and the ratio. Target: local-run / torchrun <= 1.1.

A torchrun-by-hand run whose only failure is gloo's abort at interpreter shutdown (a rank killed by SIGABRT,
"terminate called without an active exception", after all 4 ranks had stepped: docs/launchers/torchrun.md,
"Ending a script safely") is run again, up to ABORT_RETRIES times, and the output says so: by hand, nothing
ends the workers without interpreter shutdown, as the launcher's worker does. Any other failure ends the
bench.

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
ABORT_RETRIES = 3
SHUTDOWN_ABORT = "terminate called without an active exception"
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
# Barrier, then destroy (docs/launchers/torchrun.md, "Ending a script safely"): no rank tears its group down
# under a peer still in a collective. It cannot stop gloo's abort at interpreter shutdown (issue 36): the
# launcher's worker avoids that by ending with os._exit; by hand, a run that hits it is retried.
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


def shutdown_abort_only(outputs: list[str], codes: list[int], stamped: int) -> bool:
    """Whether a torchrun-by-hand run failed only by gloo's abort at interpreter shutdown: every rank had
    stepped, a rank said "terminate called without an active exception", each failed torchrun names a
    worker killed by SIGABRT, and no Python traceback was printed (pure)."""
    failed = [out for out, code in zip(outputs, codes, strict=True) if code]
    return (
        bool(failed)
        and stamped == 4
        and SHUTDOWN_ABORT in "".join(outputs)
        and all("Signal 6 (SIGABRT)" in out for out in failed)
        and not any("Traceback (most recent call last)" in out for out in outputs)
    )


def time_torchrun(workdir: Path, run: int) -> float:
    for attempt in range(ABORT_RETRIES + 1):
        stamps = workdir / f"torchrun-{run}" / str(attempt)
        stamps.mkdir(parents=True)
        started, outputs, codes = _torchrun_by_hand(workdir, stamps)
        if not any(codes):
            if attempt:
                print(f"torchrun run {run}: attempt {attempt + 1} succeeded")
            return _first_step(stamps, started)
        if not shutdown_abort_only(outputs, codes, len(list(stamps.glob("rank*.json")))):
            raise SystemExit("torchrun failed:\n" + "\n".join(out[-2000:] for out in outputs))
        print(
            f"torchrun run {run}: a rank died of SIGABRT at interpreter shutdown, all 4 ranks had stepped "
            f"({SHUTDOWN_ABORT!r}: gloo, docs/launchers/torchrun.md, Ending a script safely); "
            + ("running it again" if attempt < ABORT_RETRIES else "no retries left")
        )
    raise SystemExit(f"torchrun by hand aborted at interpreter shutdown {ABORT_RETRIES + 1} times in a row")


def _torchrun_by_hand(workdir: Path, stamps: Path) -> tuple[float, list[str], list[int]]:
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
    return started, outputs, [int(proc.returncode) for proc in procs]


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
