"""What keeping stdout and stderr apart costs a chatty replica, and what reading its logs costs.

1. A replica printing 200,000 lines (half to stderr, ~16 MB), its streams through `LogCapture` (two pipes,
   one copying thread, the index), against the baseline of both streams handed one log file (what the
   runner did before): wall time of the replica, same script, best of 3. Budget: at most 1.5x.
2. Reading those lines back with stream and time (`LogReader`), and an emulator `entries:list` of the
   job's entries through google-cloud-logging, page by page (1000 a page).

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
BUDGET = 1.5
CHATTY = (
    "import sys\n"
    f"for i in range({LINES // 2}):\n"
    "    print(f'step {i} loss 0.123456 lr 0.001 throughput 1234.5 samples/s', flush=True)\n"
    "    print(f'warning {i}: something mildly worrying', file=sys.stderr, flush=True)\n"
)


def best(fn: Callable[[], object], rounds: int = 3) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return min(samples)


def direct(folder: Path) -> None:
    log = folder / "direct.log"
    log.unlink(missing_ok=True)
    with open(log, "ab") as handle:
        proc = subprocess.Popen([sys.executable, "-c", CHATTY], stdout=handle, stderr=subprocess.STDOUT)
        proc.wait()


def captured(folder: Path) -> None:
    log = folder / "captured.log"
    log.unlink(missing_ok=True)
    Path(f"{log}.index").unlink(missing_ok=True)
    capture = LogCapture(log)
    proc = subprocess.Popen([sys.executable, "-c", CHATTY], stdout=capture.stdout, stderr=capture.stderr)
    capture.start("bench")
    proc.wait()
    capture.wait(60)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        base = best(lambda: direct(folder))
        piped = best(lambda: captured(folder))
        size = (folder / "captured.log").stat().st_size
        index = Path(f"{folder / 'captured.log'}.index").stat().st_size
        print(f"{LINES} lines, {size / 1e6:.1f} MB (+ index {index / 1e6:.2f} MB)")
        print(f"one shared log file: {base:.2f} s; two pipes + LogCapture: {piped:.2f} s")
        print(f"ratio: {piped / base:.2f}x (budget {BUDGET}x)")
        start = time.perf_counter()
        lines = LogReader(folder / "captured.log").lines()
        read_s = time.perf_counter() - start
        errors = sum(line.stderr for line in lines)
        print(f"LogReader: {len(lines)} lines ({errors} stderr) in {read_s:.2f} s")
        entries_s = entries_list(folder / "captured.log")
        if entries_s is not None:
            print(f"emulator entries:list, all {len(lines)} entries in pages of 1000: {entries_s:.2f} s")
        return 0 if piped / base <= BUDGET else 1


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
