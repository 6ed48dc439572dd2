"""bench/bench_launcher.py retries a torchrun-by-hand run only when its one failure is gloo's abort at
interpreter shutdown after every rank had stepped (docs/launchers/torchrun.md, "Ending a script safely")."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from bench_launcher import SHUTDOWN_ABORT, shutdown_abort_only  # noqa: E402

ABORTED = (
    f"{SHUTDOWN_ABORT}\n  exitcode  : -6 (pid: 42)\n  traceback : Signal 6 (SIGABRT) received by PID 42\n"
)


def test_only_the_shutdown_abort_after_every_rank_stepped_is_retried() -> None:
    assert shutdown_abort_only([ABORTED, "ok"], [1, 0], stamped=4)
    assert not shutdown_abort_only(["ok", "ok"], [0, 0], stamped=4)  # nothing failed
    assert not shutdown_abort_only([ABORTED, "ok"], [1, 0], stamped=3)  # a rank never stepped
    traceback = "Traceback (most recent call last):\nValueError: bad\n"
    assert not shutdown_abort_only([ABORTED, traceback], [1, 1], stamped=4)  # another failure too
    assert not shutdown_abort_only(["Signal 6 (SIGABRT) received by PID 42"], [1], stamped=4)  # another abort
