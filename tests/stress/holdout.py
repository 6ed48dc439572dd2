"""`make holdout`: issue 44's hold-out hang, run as a user meets it, N times (not part of `make test`).

A 2 replicas x 2 processes torchrun job (DDP on gloo) whose rank 3 (workerpool1-0, local rank 1) blocks in
its data read at step 5; `health.hang_timeout` calls the job hung. Every run must leave the evidence the hang
feature exists for: all four ranks' stacks in their replica's log (`logs/workerpool{0,1}-0.log`) and in the
run folder (`health/stacks/rank-N.txt` and its `.dumped` marker), the culprit's naming its blocked frame; the
job ends FAILED with a verdict naming rank 3. Runs alternate cold and warm replica starts (`local-run --warm`,
from a pool of this script's own), and the last `--hogged` runs have a process beside them that keeps one core
busy.

    .venv/bin/python tests/stress/holdout.py                 # what `make holdout` runs: 8 runs, 3 hogged
    .venv/bin/python tests/stress/holdout.py --runs 2 --hogged 0

Each run's folder and its `local-run` output are kept in `.vertexdist/holdout/run-N/`. Exit 1 if any run lost
a dump (or did not end as a hang).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / ".vertexdist" / "holdout"
HANG_TIMEOUT_S = 6
RUN_TIMEOUT_S = 300
CULPRIT = 3

# DDP on gloo; rank 3 blocks in its data read at step 5 (the test_rank_health script).
BLOCKS = """\
import os, time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

def fetch_shard(step):
    if dist.get_rank() == 3 and step == 5:
        time.sleep(3600)  # line 7: the read that never returns
    return torch.randn(8, 4)

dist.init_process_group("gloo")
model = DDP(torch.nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1, 10_000):
    batch = fetch_shard(step)
    model(batch).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
    time.sleep(0.02)
"""


@dataclass
class Outcome:
    index: int
    warm: bool
    hogged: bool
    wall_s: float
    load: float
    problems: list[str]


def template(folder: Path) -> Path:
    (folder / "user_script.py").write_text(BLOCKS)
    doc = {
        "display_name": "holdout-hang",
        "project": "my-project",
        "staging_bucket": "gs://my-bucket/staging",
        "container_uri": "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest",
        "machine_type": "n1-standard-4",
        "replica_count": 2,
        "health": {"hang_timeout": f"{HANG_TIMEOUT_S}s"},
        "trainer": {"script": "user_script.py", "launcher": "torchrun", "nproc_per_node": 2},
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def problems_of(run: Path, stdout: str, code: int) -> list[str]:
    """What the run's folder and output lack of a hang's evidence (empty: all there). Reads files only."""
    found: list[str] = []
    try:
        summary = json.loads(stdout.splitlines()[-1])
    except (ValueError, IndexError):
        return [f"local-run exit {code}, no JSON summary"]
    message = str((summary.get("error") or {}).get("message", ""))
    if summary.get("state") != "JOB_STATE_FAILED" or not message.startswith("hung:"):
        found.append(f"not ended as a hang: {summary.get('state')} {message[:120]!r}")
    elif f"rank {CULPRIT} (workerpool1-0, local rank 1) is in fetch_shard" not in message:
        found.append(f"the verdict does not name rank {CULPRIT} in fetch_shard: {message[:200]!r}")
    for rank in range(4):
        replica = f"workerpool{rank // 2}-0"
        log_path = run / "logs" / f"{replica}.log"
        log = log_path.read_text(errors="replace") if log_path.exists() else ""
        mark = f"stacks of rank {rank} ({replica}, local rank {rank % 2})"
        if mark not in log:
            found.append(f"rank {rank}: no stacks in {replica}.log")
        elif rank == CULPRIT and 'user_script.py", line 7, in fetch_shard' not in log.split(mark, 1)[1]:
            found.append(f"rank {rank}: its stacks in the log lack the blocked frame")
        stacks = run / "health" / "stacks" / f"rank-{rank}.txt"
        if not stacks.exists() or not stacks.read_text(errors="replace").strip():
            found.append(f"rank {rank}: no health/stacks/rank-{rank}.txt")
        elif rank == CULPRIT and "in fetch_shard" not in stacks.read_text(errors="replace"):
            found.append(f"rank {rank}: health/stacks/rank-{rank}.txt lacks the blocked frame")
        if not (run / "health" / "stacks" / f"rank-{rank}.dumped").exists():
            found.append(f"rank {rank}: no health/stacks/rank-{rank}.dumped")
    return found


def one_run(index: int, warm: bool, hogged: bool, env: dict[str, str]) -> Outcome:
    folder = OUT / f"run-{index}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    path = template(folder)
    run = folder / "run"
    argv = [sys.executable, "-m", "vertexdist", "local-run", str(path), "--out", str(run), "--json"]
    if warm:
        argv.append("--warm")
    hog = start_hog() if hogged else None
    load = os.getloadavg()[0]
    started = time.monotonic()
    try:
        done = subprocess.run(
            argv, cwd=folder, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
        )
        stdout, stderr, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        stdout, stderr, code = _text(exc.stdout), _text(exc.stderr), -1
    finally:
        if hog is not None:
            stop(hog)
    wall = time.monotonic() - started
    (folder / "stdout.txt").write_text(stdout)
    (folder / "stderr.txt").write_text(stderr)
    found = [f"local-run timed out after {RUN_TIMEOUT_S} s"] if code == -1 else []
    return Outcome(index, warm, hogged, wall, load, found + problems_of(run, stdout, code))


def _text(data: bytes | str | None) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""


def start_hog() -> subprocess.Popen[bytes]:
    """One process that keeps one core busy for as long as it runs."""
    return subprocess.Popen([sys.executable, "-c", "while True:\n    pass"], stdin=subprocess.DEVNULL)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.kill()
    process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument(
        "--hogged", type=int, default=3, help="how many of the runs (the last ones) beside a hog"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from vertexdist.local.warm_pool import SOCKET_VARIABLE, start_pool

    OUT.mkdir(parents=True, exist_ok=True)
    socket = OUT / "pool.sock"
    pool = start_pool(socket, idle_s=600)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_GCE_CHECK": "true", SOCKET_VARIABLE: str(socket)}
    outcomes: list[Outcome] = []
    try:
        for index in range(1, args.runs + 1):
            hogged = index > args.runs - args.hogged
            one = one_run(index, warm=index % 2 == 0, hogged=hogged, env=env)
            outcomes.append(one)
            state = "ok" if not one.problems else "FAILED: " + "; ".join(one.problems)
            start = "warm" if one.warm else "cold"
            hog = ", beside a CPU hog" if one.hogged else ""
            print(f"run {index} ({start}{hog}; load {one.load:.1f}): {one.wall_s:.1f} s, {state}", flush=True)
    finally:
        os.kill(pool, signal.SIGTERM)
    passed = sum(not o.problems for o in outcomes)
    print(
        f"hold-out hang: {passed}/{len(outcomes)} runs left all four ranks' stacks in the log and run folder"
    )
    summary = [o.__dict__ for o in outcomes]
    (OUT / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0 if passed == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
