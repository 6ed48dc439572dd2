"""Benchmark: the loopback servers' request guard (issue 35) must not slow the emulator.

Run: .venv/bin/python bench/bench_guard.py [--runs N]
1. `submit` -> SUCCEEDED of a small 2-replica job, through the same library calls as `submit --emulator`
   (bench_submit.submit_until), on one emulator, with the guard on and off in turns (`guarded`, an
   attribute of the servers that no flag or route reaches); the ratio of the medians (goal: within 5 %).
2. What the guard costs one new connection: a GET of the job list on a fresh connection each time (the
   owner lookup runs once per connection), on and off in turns; the ratio of the medians.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_submit import LOCATION, PROJECT, submit_until, write_template

CONNECTIONS = 200


def guard(emu: Any, on: bool) -> None:
    emu.http.guarded = on
    emu.storage._server.guarded = on  # the storage API's server (the emulator keeps it private)


def fresh_connections(emu: Any) -> float:
    """Seconds per GET of the job list, each on a new connection."""
    path = f"/v1/projects/{PROJECT}/locations/{LOCATION}/customJobs?pageSize=1"
    start = time.perf_counter()
    for _ in range(CONNECTIONS):
        connection = http.client.HTTPConnection("127.0.0.1", emu.http.port, timeout=20)
        connection.request("GET", path)
        answer = connection.getresponse()
        answer.read()
        assert answer.status == 200, answer.status
        connection.close()
    return (time.perf_counter() - start) / CONNECTIONS


def main() -> None:
    import os

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-guard-"))
    import google.cloud.aiplatform_v1  # noqa: F401  (what the CLI imports lazily: not timed)

    from vertexdist.emulator import Emulator

    with Emulator(data_dir=work / "emu") as emu:
        os.environ["STORAGE_EMULATOR_HOST"] = emu.storage_endpoint
        path = write_template(work / "job", "bench-guard", "print('done')\n")
        submit_until(path, None, "SUCCEEDED", work / "sdist", emu)  # upload and install once, untimed
        timings: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.runs):
            for on in (True, False):
                guard(emu, on)
                seconds, state, _ = submit_until(path, None, "SUCCEEDED", work / "sdist", emu)
                assert state == "SUCCEEDED", state
                timings[on].append(seconds)
        per_connection: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.runs):
            for on in (True, False):
                guard(emu, on)
                per_connection[on].append(fresh_connections(emu))
        guard(emu, True)
    median_on, median_off = statistics.median(timings[True]), statistics.median(timings[False])
    print("== 1. submit -> SUCCEEDED (2 replicas printing a line), one emulator, guard on/off in turns")
    print(f"   guard on:  median {median_on:.3f} s (min {min(timings[True]):.3f} s)")
    print(f"   guard off: median {median_off:.3f} s (min {min(timings[False]):.3f} s)")
    print(f"   ratio on / off (goal <= 1.05): {median_on / median_off:.3f}")
    c_on, c_off = statistics.median(per_connection[True]), statistics.median(per_connection[False])
    print(f"== 2. one GET on a new connection ({CONNECTIONS} per run)")
    print(f"   guard on:  {c_on * 1e3:.3f} ms; guard off: {c_off * 1e3:.3f} ms; ratio {c_on / c_off:.3f}")


if __name__ == "__main__":
    main()
