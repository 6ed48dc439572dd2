"""What the start-up benchmarks share: a free port, and vertexdist against a baseline run in turns.

Runs alternate (ours, baseline, ours, ...) so the noise of a shared machine hits both alike; the first run
of ours, with a cold package cache, is timed on its own.
"""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def local_run(template: Path, out: Path, cwd: Path, *flags: str) -> float:
    """Run `vertexdist local-run template --out out [flags]` to its end; the wall time it was started at."""
    started = time.time()
    result = subprocess.run(
        [sys.executable, "-m", "vertexdist", "local-run", str(template), "--out", str(out), *flags],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise SystemExit(f"local-run failed:\n{result.stdout[-3000:]}\n{result.stderr[-2000:]}")
    return started


def compare(
    title: str,
    ours: tuple[str, Callable[[int], float]],
    baseline: tuple[str, Callable[[int], float]],
    *,
    repeats: int,
    target: float,
) -> float:
    """Time `ours` cold once, then both `repeats` times in turns; print the medians and return the ratio."""
    (our_name, our_run), (base_name, base_run) = ours, baseline
    cold = our_run(0)  # the first run installs the package into the cache
    times: dict[str, list[float]] = {our_name: [], base_name: []}
    for run in range(1, repeats + 1):
        times[our_name].append(our_run(run))
        times[base_name].append(base_run(run))
    print(title)
    print(f"{our_name} (cold package cache, 1 run): {cold:6.2f} s")
    width = max(len(name) for name in times)
    for name, runs in times.items():
        listed = ", ".join(f"{t:.2f}" for t in runs)
        print(f"{name:<{width}}  median of {repeats}: {statistics.median(runs):6.2f} s  runs {listed}")
    ratio = statistics.median(times[our_name]) / statistics.median(times[base_name])
    print(f"ratio {our_name} / {base_name}: {ratio:.2f}x (target <= {target}x)")
    return ratio
