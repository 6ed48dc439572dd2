"""`make stress`: the process-heavy tests, N times each, beside a CPU hog that takes one core.

The tests that start real processes (rank health, the launchers, managed jobs, Ctrl-C, the warm pool) are the
ones a loaded CI machine makes flaky: a race that a quiet machine never loses. This runs each group of them
`--runs` times (each round a fresh pytest process per group, as CI runs them), with one busy-looping process
beside them for the whole run, and prints per group the runs, the tests, the failures and the median wall time
of a round; then every test that failed, with how often. Exit 1 if any test failed.

    .venv/bin/python tests/stress/stress.py --runs 10          # what `make stress` runs
    .venv/bin/python tests/stress/stress.py --runs 3 --group "rank health" --no-hog

Each round's pytest output is kept in `.vertexdist/stress/` (`<group>-<round>.log`, and its junit XML), and
`summary.json` there holds the figures. docs/speed.md keeps the figures of the runs made so far.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / ".vertexdist" / "stress"

# What each group runs: pytest node ids (files, or one test in a file), relative to the repository.
GROUPS: dict[str, list[str]] = {
    "rank health": [
        "tests/local/test_rank_health.py",
        "tests/local/test_python_launcher_health.py",
    ],
    "launchers": [
        "tests/launcher/test_launcher_processes.py",
        "tests/launcher/test_worker_exit.py",
        "tests/local/test_torchrun_jobs.py",
    ],
    "managed jobs": [
        "tests/managed/test_local_managed.py",
        "tests/managed/test_managed_logs.py",
    ],
    "Ctrl-C": [
        "tests/test_cli_main.py::test_an_interrupted_run_exits_130_even_while_a_library_thread_lives_on",
        "tests/tuning/test_local_run.py::test_sigint_stops_every_trial_and_leaves_no_process",
    ],
    "warm pool": [
        "tests/local/test_warm_pool.py",
    ],
}


@dataclass
class Round:
    """One pytest run of a group: its tests' outcomes (test id -> passed) and its wall time."""

    group: str
    index: int
    outcomes: dict[str, bool]
    wall_s: float
    exit_code: int


@dataclass
class GroupFigures:
    group: str
    runs: int = 0
    tests: int = 0  # test runs, over every round
    failures: int = 0
    walls: list[float] = field(default_factory=list)
    failed: dict[str, int] = field(default_factory=dict)  # test id -> how many of the rounds it failed

    def as_dict(self) -> dict[str, object]:
        return {
            "group": self.group,
            "runs": self.runs,
            "tests": self.tests,
            "failures": self.failures,
            "median_round_s": round(statistics.median(self.walls), 1) if self.walls else None,
            "failed": dict(sorted(self.failed.items())),
        }


def outcomes_of(junit_xml: str) -> dict[str, bool]:
    """Each test's outcome in a pytest junit XML report: `file::name` -> passed (skipped counts as passed).
    Pure."""
    found: dict[str, bool] = {}
    for case in ET.fromstring(junit_xml).iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        found[name] = case.find("failure") is None and case.find("error") is None
    return found


def tally(rounds: list[Round]) -> dict[str, GroupFigures]:
    """The figures of each group over its rounds; a round whose pytest failed with no failed test in its
    report (it crashed, or timed out as a whole) counts as one failure named `<round>`. Pure."""
    figures: dict[str, GroupFigures] = {}
    for one in rounds:
        fig = figures.setdefault(one.group, GroupFigures(one.group))
        fig.runs += 1
        fig.walls.append(one.wall_s)
        fig.tests += len(one.outcomes)
        failed = [name for name, passed in one.outcomes.items() if not passed]
        if one.exit_code not in (0, 5) and not failed:  # 5: no tests collected (a skip-only group)
            failed = [f"<round: pytest exit {one.exit_code}>"]
        fig.failures += len(failed)
        for name in failed:
            fig.failed[name] = fig.failed.get(name, 0) + 1
    return figures


def table(figures: dict[str, GroupFigures]) -> str:
    lines = [f"{'GROUP':<14} {'RUNS':>4} {'TESTS':>5} {'FAILED':>6} {'ROUND (median)':>15}"]
    for fig in figures.values():
        median = f"{statistics.median(fig.walls):.1f}s" if fig.walls else "-"
        lines.append(f"{fig.group:<14} {fig.runs:>4} {fig.tests:>5} {fig.failures:>6} {median:>15}")
    for fig in figures.values():
        for name, count in sorted(fig.failed.items()):
            lines.append(f"failed {count}/{fig.runs}: {name}")
    return "\n".join(lines)


def start_hog() -> subprocess.Popen[bytes]:
    """One process that keeps one core busy for as long as it runs."""
    return subprocess.Popen([sys.executable, "-c", "while True:\n    pass"], stdin=subprocess.DEVNULL)


def run_round(group: str, index: int, targets: list[str], timeout_s: float) -> Round:
    slug = group.replace(" ", "-").lower()
    report = OUT / f"{slug}-{index}.xml"
    log = OUT / f"{slug}-{index}.log"
    report.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_GCE_CHECK": "true"}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *targets]
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        try:
            code = subprocess.run(
                argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s
            ).returncode
        except subprocess.TimeoutExpired:
            code = -1
    wall = time.monotonic() - started
    outcomes = outcomes_of(report.read_text(encoding="utf-8")) if report.exists() else {}
    return Round(group, index, outcomes, wall, code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--runs", type=int, default=10, help="rounds of each group (default 10)")
    parser.add_argument(
        "--group", action="append", choices=sorted(GROUPS), help="only this group (repeatable); default all"
    )
    parser.add_argument("--no-hog", action="store_true", help="no CPU hog beside the tests")
    parser.add_argument(
        "--round-timeout", type=float, default=1800.0, help="seconds one round of a group may take"
    )
    args = parser.parse_args(argv)
    groups = {name: GROUPS[name] for name in (args.group or GROUPS)}
    OUT.mkdir(parents=True, exist_ok=True)
    hog = None if args.no_hog else start_hog()
    rounds: list[Round] = []
    started = time.monotonic()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stopped early: the rounds so far still count
    try:
        for index in range(1, args.runs + 1):
            for group, targets in groups.items():
                one = run_round(group, index, targets, args.round_timeout)
                rounds.append(one)
                bad = sum(not passed for passed in one.outcomes.values())
                print(
                    f"round {index}/{args.runs} {group}: {len(one.outcomes)} tests, {bad} failed, "
                    f"{one.wall_s:.1f}s (pytest exit {one.exit_code})",
                    flush=True,
                )
    except KeyboardInterrupt:
        print("stopped: the figures are those of the rounds that ended", flush=True)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    figures = tally(rounds)
    print(table(figures))
    total = time.monotonic() - started
    failures = sum(f.failures for f in figures.values())
    beside = "beside a CPU hog" if hog else "without a CPU hog"
    done = max((r.index for r in rounds), default=0)
    print(f"{failures} failure(s) in {done} round(s) of each group, {beside}, {total:.0f}s")
    summary = {
        "runs": done,
        "hog": hog is not None,
        "cpus": os.cpu_count(),
        "total_s": round(total, 1),
        "groups": [f.as_dict() for f in figures.values()],
    }
    (OUT / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
