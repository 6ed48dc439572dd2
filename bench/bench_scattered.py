"""Replicas that start scattered: a 120 s spread against the same job started together, in this same script.

Vertex starts each replica as soon as its VM is ready, so ranks can join minutes apart. Each job below, a
2-replica local-run, is run twice: once with a fault plan's `scattered_start` (max_delay 126 s, seed 15: one
replica starts about 120 s after the other) and once without. The template sets no rendezvous timeout, so the
default `health.rendezvous_timeout` (10 min) is what the ranks wait with.

- torchrun: a DDP script under `launcher: torchrun`, 1 process per replica (torchrun's static rendezvous).
- the bundled trainer (`trainer_pkg.task`, its own TCPStore rendezvous).
- Ray: `launcher: ray`, the head on workerpool0 waiting for every node, a driver that needs both nodes.

Bar: every scattered job SUCCEEDS; the extra time over the job started together is the spread itself
(extra time / the last replica's delay about 1.0: nothing else waits, nothing restarts).
Ray is an optional extra (`pip install 'vertexdist[ray]'`); `--only torchrun,trainer` leaves it out.

Run: .venv/bin/python bench/bench_scattered.py [--only torchrun,trainer,ray]   (about 2.5 minutes a job)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
MAX_DELAY_S = 126.0
SEED = 15
SCRIPT = """\
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
model = DDP(torch.nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(50):
    model(torch.randn(8, 4)).sum().backward()
    optimizer.step()
"""
RAY_DRIVER = """\
import ray

ray.init()
assert len(ray.nodes()) == 2, ray.nodes()
print("ray nodes:", len(ray.nodes()), flush=True)
"""
BASE: dict[str, Any] = {
    "display_name": "bench-scattered",
    "project": "my-project",
    "staging_bucket": "gs://my-bucket/staging",
    "container_uri": "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest",
    "machine_type": "n1-standard-4",
    "replica_count": 2,
}
JOBS: dict[str, dict[str, Any]] = {
    "torchrun": {"trainer": {"script": "train.py", "launcher": "torchrun", "nproc_per_node": 1}},
    "trainer": {"trainer": {"args": ["--epochs=1", "--samples=2000", "--nproc-per-node=1"]}},
    "ray": {"trainer": {"script": "driver.py", "launcher": "ray"}},
}


def delays_s() -> tuple[float, float]:
    """The spread between the two replicas' starts, and how late the last one starts."""
    sys.path.insert(0, str(REPO))
    from vertexdist.spec.fault_plan import ScatteredStartFault

    delays = ScatteredStartFault(max_delay=MAX_DELAY_S, seed=SEED).delays(["workerpool0-0", "workerpool1-0"])
    return abs(delays["workerpool0-0"] - delays["workerpool1-0"]), max(delays.values())


def run_job(job: dict[str, Any], *, scattered: bool) -> tuple[str, float]:
    """The job's final state and its wall seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "train.py").write_text(SCRIPT)
        (cwd / "driver.py").write_text(RAY_DRIVER)
        (cwd / "job.yaml").write_text(yaml.safe_dump({**BASE, **job}))
        argv = [sys.executable, "-m", "vertexdist", "local-run", "job.yaml", "--out", "run", "--json"]
        if scattered:
            fault = {"kind": "scattered_start", "max_delay": f"{MAX_DELAY_S:g}s", "seed": SEED}
            (cwd / "faults.yaml").write_text(yaml.safe_dump([fault]))
            argv += ["--fault-plan", "faults.yaml"]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        started = time.monotonic()
        result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
        took = time.monotonic() - started
        lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
        state = str(json.loads(lines[-1]).get("state")) if lines else "no summary"
        if state != "JOB_STATE_SUCCEEDED":
            print(result.stdout[-2000:], result.stderr[-2000:], file=sys.stderr)
        return state, took


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default=",".join(JOBS), help="comma-separated: " + ", ".join(JOBS))
    names = [n.strip() for n in parser.parse_args().only.split(",") if n.strip()]
    unknown = [n for n in names if n not in JOBS]
    if unknown:
        parser.error(f"unknown job {unknown[0]!r}; choose from {', '.join(JOBS)}")
    spread, last = delays_s()
    print(
        f"spread between the two replicas' starts: {spread:.1f} s, the last {last:.1f} s late"
        f" (max_delay {MAX_DELAY_S:g} s, seed {SEED})"
    )
    ok = True
    for name in names:
        job = JOBS[name]
        base_state, base_s = run_job(job, scattered=False)
        state, took = run_job(job, scattered=True)
        ratio = (took - base_s) / last
        ok = ok and state == base_state == "JOB_STATE_SUCCEEDED"
        print(
            f"{name}: together {base_state} in {base_s:.1f} s; scattered {state} in {took:.1f} s;"
            f" extra / last start's delay = {ratio:.2f}"
        )
    print("bar (every scattered job succeeds):", "met" if ok else "NOT met")


if __name__ == "__main__":
    main()
