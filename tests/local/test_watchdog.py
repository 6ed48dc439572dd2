"""The job watchdog (`vertexdist.local.watchdog`) with real processes: a supervisor that dies by SIGKILL takes
its registered groups, its token carriers and its containers (stop commands) with it; one that ends its
job normally leaves everything alone."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

# A supervisor: starts a watchdog and three sleepers in sessions of their own, registers what `how` says,
# prints their pids, then dies by SIGKILL (or ends the job normally with "done").
SUPERVISOR = textwrap.dedent(
    """
    import json, os, signal, subprocess, sys
    from vertexdist.local.watchdog import TOKEN_VARIABLE, Watchdog
    how, marker = sys.argv[1], sys.argv[2]
    dog = Watchdog.start(grace_s=float(sys.argv[3]), label="job test")
    code = sys.argv[4]
    grouped = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    carrier = subprocess.Popen(
        [sys.executable, "-c", code], start_new_session=True, env={**os.environ, TOKEN_VARIABLE: dog.token}
    )
    forgotten = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    dog.add_group(grouped.pid)
    dog.add_group(forgotten.pid)
    dog.remove_group(forgotten.pid)
    dog.add_stop_command([sys.executable, "-c", f"open({marker!r}, 'w').write('stopped')"])
    pids = {"grouped": grouped.pid, "carrier": carrier.pid, "forgotten": forgotten.pid}
    print(json.dumps(pids), flush=True)
    sys.stdin.readline()
    if how == "done":
        dog.close()
        sys.exit(0)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)
SLEEPER = "import time; time.sleep(120)"
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"


def _supervise(
    tmp_path: Path, how: str, grace_s: float = 1.0, code: str = SLEEPER
) -> tuple[dict[str, int], Path]:
    marker = tmp_path / "stop-command-ran"
    proc = subprocess.Popen(
        [sys.executable, "-c", SUPERVISOR, how, str(marker), str(grace_s), code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    pids: dict[str, int] = json.loads(proc.stdout.readline())
    proc.stdin.write("\n")
    proc.stdin.flush()
    proc.wait(timeout=30)
    return pids, marker


def _cleanup(pids: dict[str, int]) -> None:
    for pid in pids.values():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def test_a_killed_supervisor_takes_its_groups_and_token_carriers_down(tmp_path: Path, kit: Any) -> None:
    pids, marker = _supervise(tmp_path, "kill")
    try:
        assert kit.wait_for(
            lambda: not kit.process_alive(pids["grouped"]) and not kit.process_alive(pids["carrier"]), 10
        )
        assert kit.wait_for(marker.exists, 10)  # the containers' stop commands run too
        assert kit.process_alive(pids["forgotten"])  # ungrouped: its id may belong to someone else now
    finally:
        _cleanup(pids)


def test_what_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path, kit: Any) -> None:
    pids, _ = _supervise(tmp_path, "kill", grace_s=0.5, code=STUBBORN)
    try:
        assert kit.wait_for(
            lambda: not kit.process_alive(pids["grouped"]) and not kit.process_alive(pids["carrier"]), 10
        )
    finally:
        _cleanup(pids)


def test_a_job_that_ended_normally_leaves_everything_alone(tmp_path: Path, kit: Any) -> None:
    pids, marker = _supervise(tmp_path, "done")
    try:
        time.sleep(1.5)
        assert all(kit.process_alive(pid) for pid in pids.values())
        assert not marker.exists()
    finally:
        _cleanup(pids)
