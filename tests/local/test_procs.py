"""Process-group membership from /proc: live members are found, zombies and finished groups are not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from vertexdist.local.procs import group_members, live_processes

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads Linux's /proc")

# A group leader that starts one child in its own group, prints the child's pid, then waits.
LEADER = (
    "import subprocess, sys, time;"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
    "print(child.pid, flush=True); time.sleep(60)"
)


def test_group_members_lists_the_leader_and_its_child_until_the_group_is_killed(kit: Any) -> None:
    leader = subprocess.Popen(
        [sys.executable, "-c", LEADER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert leader.stdout is not None
        child = int(leader.stdout.readline())
        assert sorted(group_members(leader.pid)) == sorted([leader.pid, child])
        assert child in [p.pid for p in live_processes() if p.ppid == leader.pid]
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
    # The child is reparented and reaped by init (or lingers as a zombie): either way, not a member.
    assert kit.wait_for(lambda: not group_members(leader.pid), timeout=10)


def test_a_zombie_is_not_a_member() -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    # Not reaped yet: once it exits it stays a zombie until wait() below.
    os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
    try:
        assert group_members(process.pid) == []
    finally:
        process.wait()
