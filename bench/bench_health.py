"""Rank health's cost and its speed, each against a baseline measured in this same script.

1. Cost: the bundled trainer's samples/s (`python -m trainer_pkg.task`, 2 CPU ranks, gloo) with every rank's
   health watcher on (VERTEXDIST_HEALTH_DIR set, as local runs set it: steps counted, frames sampled ten
   times a second, a heartbeat file every 2 s) against the same run with no watcher. Runs interleaved.
   Bar: on / off >= 0.98.
   On a shared machine this ratio swings with the load; 3. is the watcher's own work, which does not.
2. Speed: a local-run torchrun job (1 replica x 2 processes) whose rank 1 a fault plan's `hang` blocks after
   step 5: seconds from its ranks' last step to the job's FAILED event, beyond `hang_timeout`. Bar: <= 10 s.
3. The watcher's own work, in-process: one step hook call, one frame sample, one heartbeat write, and what
   they add up to per second (10 samples, a heartbeat every 2 s) as a share of one core.

Run: .venv/bin/python bench/bench_health.py [--samples N] [--epochs E] [--repeats R]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from bench_trainer import PYTHON, REPO, clean_env, metrics

HANG_TIMEOUT_S = 5
SCRIPT = """\
import time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
model = DDP(torch.nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(10_000):
    model(torch.randn(8, 4)).sum().backward()
    optimizer.step()
    time.sleep(0.02)
"""


def throughput(samples: int, epochs: int, *, watched: bool) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        args = ["--nproc-per-node=2", f"--epochs={epochs}", f"--samples={samples}", "--batch-size=64"]
        env = clean_env(**({"VERTEXDIST_HEALTH_DIR": str(cwd / "health")} if watched else {}))
        # As in every package vertexdist builds: the shipped launcher sits beside trainer_pkg.
        env["PYTHONPATH"] = os.pathsep.join((str(REPO / "vertexdist" / "shipped"), env["PYTHONPATH"]))
        result = subprocess.run(
            [PYTHON, "-m", "trainer_pkg.task", *args], cwd=cwd, env=env, capture_output=True, text=True
        )
        if result.returncode != 0:
            raise SystemExit(f"trainer failed:\n{result.stderr[-3000:]}")
        if watched and not list((cwd / "health" / "ranks").glob("rank-*.json")):
            raise SystemExit("no heartbeat: the watcher did not run")
        return [float(m["samples_per_s"]) for m in metrics(cwd) if m["event"] == "epoch"]  # type: ignore[arg-type]


def own_work() -> tuple[float, float, float]:
    """Microseconds per step hook, per sample, per heartbeat file."""
    sys.path.insert(0, str(REPO / "vertexdist" / "shipped"))
    from vertexdist_launcher import health

    with tempfile.TemporaryDirectory() as tmp:
        watcher = health.Watcher({health.DIR_VARIABLE: tmp, "RANK": "0", "WORLD_SIZE": "2"})
        timed = []
        for call, count in ((watcher.on_step, 20_000), (watcher.sample, 2_000), (watcher.write_beat, 200)):
            started = time.perf_counter()
            for _ in range(count):
                call()
            timed.append((time.perf_counter() - started) / count * 1e6)
    return timed[0], timed[1], timed[2]


def hang_to_failed() -> float:
    """Seconds from the last step to FAILED, beyond hang_timeout."""
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "train.py").write_text(SCRIPT)
        template = {
            "display_name": "bench-health",
            "project": "my-project",
            "staging_bucket": "gs://my-bucket/staging",
            "machine_type": "n1-standard-4",
            "health": {"hang_timeout": f"{HANG_TIMEOUT_S}s"},
            "trainer": {"script": "train.py", "launcher": "torchrun", "nproc_per_node": 2},
        }
        (cwd / "job.yaml").write_text(yaml.safe_dump(template))
        plan = [{"kind": "hang", "replica": "workerpool0-0", "local_rank": 1, "after_step": 5}]
        (cwd / "faults.yaml").write_text(yaml.safe_dump(plan))
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        argv = [sys.executable, "-m", "vertexdist", "local-run", "job.yaml", "--out", "run", "--json"]
        result = subprocess.run(
            [*argv, "--fault-plan", "faults.yaml"], cwd=cwd, env=env, capture_output=True, text=True
        )
        events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        failed = [e for e in events if e.get("event") == "job" and e.get("state") == "JOB_STATE_FAILED"]
        if not failed or not str(failed[0]["error"]["message"]).startswith("hung:"):
            raise SystemExit(f"the job did not end hung:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
        beats = [json.loads(p.read_text()) for p in (cwd / "run" / "health" / "ranks").glob("rank-*.json")]
        last_step = max(float(b["last_step_at"]) for b in beats)
        return float(failed[0]["time"]) - last_step - HANG_TIMEOUT_S


def health_sample_s() -> float:
    return 0.1  # vertexdist_launcher.health.SAMPLE_S


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    # Epochs of a few seconds: at 50,000 samples (under half a second) the ratio swung with start-up noise.
    parser.add_argument("--samples", type=int, default=400_000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()
    print(f"machine: {len(os.sched_getaffinity(0))} CPU cores, load average {os.getloadavg()[0]:.1f}")
    on: list[float] = []
    off: list[float] = []
    for _ in range(args.repeats):  # interleaved: load from elsewhere hits both alike
        on += throughput(args.samples, args.epochs, watched=True)[1:]  # the first epoch warms up
        off += throughput(args.samples, args.epochs, watched=False)[1:]
    ratio = statistics.median(on) / statistics.median(off)
    print(f"1. trainer_pkg.task, 2 CPU ranks, {args.samples} samples, {args.epochs} epochs x {args.repeats}")
    for name, values in (("health on ", on), ("health off", off)):
        listed = ", ".join(f"{v:,.0f}" for v in values)
        print(f"   {name}  median {statistics.median(values):>9,.0f} samples/s ({listed})")
    print(f"   ratio on / off: {ratio:.3f}x  (bar: >= 0.98x)")
    beyond = hang_to_failed()
    print(f"2. hang -> FAILED beyond hang_timeout ({HANG_TIMEOUT_S}s): {beyond:.1f} s  (bar: <= 10 s)")
    hook, sample, beat = own_work()
    share = (sample / health_sample_s() + beat / 2.0) / 1e6 * 100
    print(f"3. watcher's own work: step hook {hook:.1f} us, sample {sample:.1f} us, heartbeat {beat:.0f} us;")
    print(f"   {share:.3f}% of one core per second")


if __name__ == "__main__":
    main()
