"""Record real 2 x 2 runs' heartbeats, as the local monitor reads them, for `test_straggler_record.py`.

    PYTHONPATH=. python tests/health/record_heartbeats.py OUT.json [--runs 10] [--slow 0.1 ...]

Each run is `vertexdist local-run` of a plain DDP loop (gloo; 2 replicas x 2 torchrun processes, 150
steps); while it runs the run folder's `health/ranks/rank-*.json` are read every 0.25 s, and every change is
kept as the monitor would have seen it then (the set of each rank's latest heartbeat). `--slow D` adds a
run whose rank 3 takes D seconds longer each step (a fault plan's `slow`). Only the fields the straggler
rule reads are kept. The real 2 x 2 run the suite makes itself is the emulator's
(`tests/emulator/test_hang_read_by_endpoint.py`: 30 undisturbed steps, then a hung rank, no straggler).

The data in `data/heartbeats_2x2.json` was recorded with `--runs 10 --slow 0.1 --slow 0.05` on a 2-core
machine at load average 10-15 (each run about 100 s, torch's import included).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import yaml

STEPS = 150
KEPT = ("rank", "world_size", "step", "own_step_s", "state")
LOOP = f"""\
import time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
model = DDP(torch.nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range({STEPS}):
    model(torch.randn(8, 4)).sum().backward()
    optimizer.step()
    time.sleep(0.05)
"""


def _template(folder: Path) -> Path:
    (folder / "loop.py").write_text(LOOP)
    doc = {
        "display_name": "undisturbed",
        "project": "my-project",
        "staging_bucket": "gs://my-bucket/staging",
        "container_uri": "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest",
        "machine_type": "n1-standard-4",
        "replica_count": 2,
        "trainer": {"script": "loop.py", "launcher": "torchrun", "nproc_per_node": 2},
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _snapshot(ranks: Path) -> dict[int, dict[str, Any]]:
    found = {}
    for path in ranks.glob("rank-*.json"):
        try:
            beat = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        kept = {k: beat.get(k) for k in KEPT}
        if isinstance(kept["own_step_s"], float):
            kept["own_step_s"] = round(kept["own_step_s"], 6)
        found[int(beat["rank"])] = kept
    return found


def record(slow: float | None = None, timeout_s: float = 600) -> dict[str, Any]:
    """One real 2 x 2 local run: `{"slow": D | None, "ok": bool, "snapshots": [[beat, ...], ...]}`."""
    with tempfile.TemporaryDirectory(prefix="vd-record-") as temp:
        folder = Path(temp)
        template, run = _template(folder), folder / "run"
        argv = [sys.executable, "-m", "vertexdist", "local-run", str(template), "--out", str(run), "--json"]
        if slow is not None:
            plan = [{"kind": "slow", "replica": "workerpool1-0", "local_rank": 1, "delay": slow}]
            (folder / "faults.yaml").write_text(yaml.safe_dump(plan))
            argv += ["--fault-plan", str(folder / "faults.yaml")]
        snapshots: list[list[dict[str, Any]]] = []
        done = threading.Event()

        def watch() -> None:
            last: dict[int, dict[str, Any]] = {}
            while not done.wait(0.25):
                now = _snapshot(run / "health" / "ranks")
                if now and now != last:
                    snapshots.append([now[r] for r in sorted(now)])
                    last = now

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        finished = subprocess.run(
            argv, cwd=folder, capture_output=True, text=True, timeout=timeout_s, env=env
        )
        done.set()
        watcher.join()
        return {"slow": slow, "ok": finished.returncode == 0, "snapshots": snapshots}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--slow", type=float, action="append", default=[])
    args = parser.parse_args()
    runs = []
    for n in range(args.runs):
        runs.append(record())
        print(f"undisturbed run {n + 1}: ok={runs[-1]['ok']}, {len(runs[-1]['snapshots'])} snapshots")
    for delay in args.slow:
        runs.append(record(slow=delay))
        print(f"slowed run ({delay}s): ok={runs[-1]['ok']}, {len(runs[-1]['snapshots'])} snapshots")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(runs, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
