"""Benchmark: `validate` and `render` on hostile templates against the same commands on a normal one.

Run: .venv/bin/python bench/bench_hostile_input.py [--runs N]
Templates: a 50 MB `trainer.args` value, a YAML alias bomb (9^9 values), 5,000 wrong values in
`trainer.args`. Each command is a fresh interpreter; prints min wall times, the ratio to the normal
template (goal: at most 5x for validate and render alike; before the limits, render of the 50 MB value
took ~94 s, several hundred times the baseline) and how many bytes each printed (goal: under 4 KiB).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAD = "display_name: bench\nproject: vertexdist-demo\nstaging_bucket: gs://vertexdist-demo/staging\n"


def templates(folder: Path) -> dict[str, Path]:
    bomb = ['  a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    bomb += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    texts = {
        "normal": HEAD + "trainer:\n  args: ['--epochs', '1']\n",
        "50 MB argument": HEAD + "trainer:\n  args:\n  - " + "x" * (50 * 1024 * 1024) + "\n",
        "alias bomb": HEAD + "anchors:\n" + "\n".join(bomb) + "\ntrainer:\n  args: *a8\n",
        "5,000 wrong values": HEAD + "trainer:\n  args: [" + ", ".join(["[1, [2]]"] * 5000) + "]\n",
    }
    paths = {}
    for index, (name, text) in enumerate(texts.items()):
        paths[name] = folder / f"t{index}.yaml"
        paths[name].write_text(text)
    return paths


def run(args: list[str]) -> tuple[float, int]:
    env = {**os.environ, "NO_GCE_CHECK": "true"}
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "vertexdist", *args], cwd=REPO, env=env, capture_output=True, timeout=600
    )
    return time.perf_counter() - start, len(result.stdout) + len(result.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="vertexdist-bench-hostile-"))
    try:
        paths = templates(folder)
        for command in ("validate", "render"):
            baseline = min(run([command, str(paths["normal"])])[0] for _ in range(options.runs))
            print(f"{command} normal template: {baseline:.3f} s")
            for name, path in paths.items():
                if name == "normal":
                    continue
                timings = [run([command, str(path)]) for _ in range(options.runs)]
                best = min(t for t, _ in timings)
                printed = timings[0][1]
                print(f"  {name:<20} {best:7.3f} s  {best / baseline:5.1f}x normal   printed {printed} bytes")
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
