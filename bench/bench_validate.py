"""Benchmark: cold `vertexdist validate job_templates/` against cold `import google.cloud.aiplatform`.

Run: .venv/bin/python bench/bench_validate.py [--runs N]
Prints min/median wall times of each (fresh interpreters, run alternately so noise hits both), the ratio
(goal: at most 0.10), and the time to validate 1,000 generated templates in one call (goal: under 1 s).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEMPLATES = REPO / "job_templates"
VERTEXDIST = [sys.executable, "-m", "vertexdist"]


def wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode not in (0,):
        raise SystemExit(f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stderr}")
    return elapsed


def generated_templates(folder: Path, count: int) -> None:
    """Write `count` valid templates, each a variation of a shipped one (different sizes and names)."""
    sources = sorted(TEMPLATES.glob("*.yaml"))
    for i in range(count):
        source = sources[i % len(sources)]
        text = source.read_text().replace("display_name: ", f"display_name: gen-{i:04d}-", 1)
        # Paths in a `build` section are relative to the template; the copies live elsewhere.
        text = text.replace("dockerfile: ../", f"dockerfile: {REPO}/")
        text = text.replace("context: ..", f"context: {REPO}")
        (folder / f"{i:04d}-{source.name}").write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--count", type=int, default=1000)
    args = parser.parse_args()
    env = {**os.environ, "NO_GCE_CHECK": "true", "PYTHONDONTWRITEBYTECODE": "0"}

    validate_cmd = [*VERTEXDIST, "validate", str(TEMPLATES)]
    sdk_cmd = [sys.executable, "-c", "import google.cloud.aiplatform"]
    # A warm-up each, so both read compiled bytecode: "cold" = a fresh interpreter, not an empty disk cache.
    wall(validate_cmd, env)
    wall(sdk_cmd, env)
    validate_times: list[float] = []
    sdk_times: list[float] = []
    for _ in range(args.runs):
        validate_times.append(wall(validate_cmd, env))
        sdk_times.append(wall(sdk_cmd, env))

    folder = Path(tempfile.mkdtemp(prefix="vertexdist-bench-"))
    try:
        generated_templates(folder, args.count)
        many_cmd = [*VERTEXDIST, "validate", str(folder)]
        many_times = [wall(many_cmd, env) for _ in range(3)]
    finally:
        shutil.rmtree(folder)

    def line(name: str, times: list[float]) -> str:
        median = statistics.median(times)
        return f"{name:<46} min {min(times):6.3f} s   median {median:6.3f} s   (n={len(times)})"

    print(line("vertexdist validate job_templates/ (cold)", validate_times))
    print(line("python -c 'import google.cloud.aiplatform'", sdk_times))
    ratio_min = min(validate_times) / min(sdk_times)
    ratio_median = statistics.median(validate_times) / statistics.median(sdk_times)
    print(
        f"ratio validate / aiplatform import: min {ratio_min:.3f}, median {ratio_median:.3f}   (goal <= 0.10)"
    )
    print(line(f"vertexdist validate ({args.count} templates, one call)", many_times))
    per = statistics.median(many_times) / args.count * 1000
    print(f"  {per:.2f} ms per template (median run)   (goal: whole call < 1 s)")


if __name__ == "__main__":
    main()
