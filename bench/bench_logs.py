"""What telling stderr from stdout costs a chatty replica, and what reading its logs back costs.

1. A replica printing 200,000 flushed lines as the runner runs it (stdout into the log, stderr through
   `LogCapture`'s pipe and thread, the index), against the baseline of both streams handed one log file
   (what the runner did before): wall time of the replica, same script, best of 5 taken in turns, for
   three mixes: stdout only, one stderr line in 20 (a training loop with warnings; budget 1.2x), every
   other line on stderr (the worst case: each stderr piece waits for stdout's line to end).
2. Reading the worst case's lines back with stream and time (`LogReader`), and an emulator `entries:list`
   of them through google-cloud-logging, page by page (1000 a page).

    .venv/bin/python bench/bench_logs.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from vertexdist.local.log_capture import LogCapture  # noqa: E402
from vertexdist.local.log_records import LogReader  # noqa: E402

LINES = 200_000
BUDGET = 1.2  # for the one-in-20 mix
CHATTY = (
    "import sys\n"
    "every = int(sys.argv[1])\n"
    f"for i in range({LINES}):\n"
    "    if every and i % every == 0:\n"
    "        print(f'warning {i}: something mildly worrying', file=sys.stderr, flush=True)\n"
    "    else:\n"
    "        print(f'step {i} loss 0.123456 lr 0.001 throughput 1234.5 samples/s', flush=True)\n"
)


def best_pair(
    first: Callable[[], object], second: Callable[[], object], rounds: int = 5
) -> tuple[float, float]:
    """Best times of two runs taken in turns, so a machine that gets busier slows both alike."""
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for fn, times in ((first, samples[0]), (second, samples[1])):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return min(samples[0]), min(samples[1])


def direct(folder: Path, every: int) -> None:
    log = folder / "direct.log"
    log.unlink(missing_ok=True)
    with open(log, "ab") as handle:
        command = [sys.executable, "-c", CHATTY, str(every)]
        subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT).wait()


def captured(folder: Path, every: int) -> Path:
    log = folder / "captured.log"
    log.unlink(missing_ok=True)
    Path(f"{log}.index").unlink(missing_ok=True)
    with open(log, "ab") as stdout:
        capture = LogCapture(log)
        proc = subprocess.Popen(
            [sys.executable, "-c", CHATTY, str(every)], stdout=stdout, stderr=capture.stderr
        )
        capture.start("bench")
    proc.wait()
    capture.wait(60)
    return log


def main() -> int:
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for every, what in (
            (0, "stdout only"),
            (20, "1 line in 20 on stderr"),
            (2, "every other line on stderr"),
        ):
            base, piped = best_pair(lambda e=every: direct(folder, e), lambda e=every: captured(folder, e))
            note = f" (budget {BUDGET}x)" if every == 20 else ""
            print(
                f"{what}: one shared log file {base:.2f} s, stderr through LogCapture {piped:.2f} s:"
                f" {piped / base:.2f}x{note}"
            )
            ok = ok and (every != 20 or piped / base <= BUDGET)
        log = folder / "captured.log"
        index = Path(f"{log}.index").stat().st_size
        print(f"{LINES} lines, {log.stat().st_size / 1e6:.1f} MB (+ index {index / 1e6:.2f} MB)")
        start = time.perf_counter()
        lines = LogReader(log).lines(final=True)
        read_s = time.perf_counter() - start
        errors = sum(line.stderr for line in lines)
        print(f"LogReader: {len(lines)} lines ({errors} of {LINES // 2} stderr) in {read_s:.2f} s")
        entries_s = entries_list(log)
        print(f"emulator entries:list, all {len(lines)} entries in pages of 1000: {entries_s:.2f} s")
    return 0 if ok else 1


def entries_list(log: Path) -> float | None:
    """Every entry of a one-replica job whose log is `log`, through the real client against an emulator."""
    os.environ.setdefault("NO_GCE_CHECK", "true")
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.logging_v2.client import Client

    from vertexdist.emulator import Emulator

    with Emulator() as emu:
        job_id = "1234567890"
        name = f"projects/bench-proj/locations/us-central1/customJobs/{job_id}"
        emu.store.insert({"name": name, "state": "JOB_STATE_SUCCEEDED", "jobSpec": {}})
        logs = emu.data_dir / "jobs" / job_id / "logs"  # type: ignore[operator]
        logs.mkdir(parents=True)
        (logs / "workerpool0-0.log").write_bytes(log.read_bytes())
        (logs / "workerpool0-0.log.index").write_bytes(Path(f"{log}.index").read_bytes())
        client = Client(
            project="bench-proj",
            credentials=AnonymousCredentials(),
            _use_grpc=False,
            client_options={"api_endpoint": emu.vertex_endpoint},
        )
        start = time.perf_counter()
        entries = client.list_entries(
            filter_=f'resource.labels.job_id="{job_id}" AND timestamp>="2000-01-01T00:00:00Z"', page_size=1000
        )
        count = sum(1 for _ in entries)
        elapsed = time.perf_counter() - start
        assert count == LINES, count
        return elapsed


if __name__ == "__main__":
    sys.exit(main())
