"""What `/gcs` costs a replica: the same 100 MB checkpoint (`torch.save` of a state dict, then fsync) written
through `/gcs/BUCKET/...` by a process behind vertexdist's mount namespace (`local/gcs_namespace.py`, as
every local replica runs), and straight into the run folder's gs:// root by a process without one.

Runs alternate (through /gcs, straight, through /gcs, ...) so a shared machine's noise hits both alike; each
process times its own write (its start-up, torch's import included, is not the checkpoint's cost). The ratio
of the medians should be <= 1.1x: `/gcs` is a bind mount of the same folder. The namespace's own start-up
(the wrapper, then `true`) is printed beside it.

    .venv/bin/python bench/bench_gcs.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from vertexdist.local import gcs_mount  # noqa: E402

REPEATS = 5
TARGET = 1.1
MEGABYTES = 100
WRITER = f"""
import os, sys, time, torch
path = sys.argv[1]
state = {{"weights": torch.ones({MEGABYTES} * 1024 * 1024 // 4, dtype=torch.float32)}}
os.makedirs(os.path.dirname(path), exist_ok=True)
start = time.perf_counter()
with open(path, "wb") as handle:
    torch.save(state, handle)
    handle.flush()
    os.fsync(handle.fileno())
print(time.perf_counter() - start)
os.remove(path)
"""


def write_once(argv: list[str]) -> float:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"the writer failed:\n{result.stderr[-3000:]}")
    return float(result.stdout.strip().splitlines()[-1])


def started_in(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True)
    return time.perf_counter() - start


def main() -> None:
    problem = gcs_mount.problem()
    if problem is not None:
        raise SystemExit(f"nothing to measure: {problem}")
    with tempfile.TemporaryDirectory(prefix="vertexdist-bench-gcs-") as tmp:
        run = Path(tmp)
        root = run / "gcs"
        root.mkdir()
        mapped = [
            *gcs_mount.launch_argv(
                [sys.executable, "-c", WRITER, "/gcs/bench-bucket/ckpt/model.pt"], root, run
            )
        ]
        straight = [sys.executable, "-c", WRITER, str(root / "bench-bucket" / "ckpt" / "model.pt")]
        write_once(mapped)  # the first write of each warms the page cache and torch's import alike
        write_once(straight)
        times: dict[str, list[float]] = {"through /gcs": [], "straight into the run folder": []}
        for _ in range(REPEATS):
            times["through /gcs"].append(write_once(mapped))
            times["straight into the run folder"].append(write_once(straight))
        wrapped_start = statistics.median(
            started_in([*gcs_mount.launch_argv(["true"], root, run)]) for _ in range(REPEATS)
        )
        plain_start = statistics.median(started_in(["true"]) for _ in range(REPEATS))
    print(f"a {MEGABYTES} MB checkpoint (torch.save + fsync), {REPEATS} runs each, in turns")
    width = max(len(name) for name in times)
    for name, runs in times.items():
        listed = ", ".join(f"{t:.3f}" for t in runs)
        print(f"{name:<{width}}  median {statistics.median(runs):6.3f} s  runs {listed}")
    ratio = statistics.median(times["through /gcs"]) / statistics.median(
        times["straight into the run folder"]
    )
    print(f"ratio through /gcs / straight: {ratio:.2f}x (target <= {TARGET}x)")
    behind, bare = wrapped_start * 1000, plain_start * 1000
    print(f"a replica's start behind the namespace: {behind:.0f} ms (a bare `true`: {bare:.0f} ms)")
    if ratio > TARGET:
        raise SystemExit(f"ratio {ratio:.2f}x is over the target {TARGET}x")


if __name__ == "__main__":
    main()
