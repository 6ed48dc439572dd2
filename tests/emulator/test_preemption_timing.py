"""The preemption driver on its own: SIGTERM `after` the replica is seen, SIGKILL only once the grace is
over and only to a replica still there (a pid that went away may be reused)."""

from __future__ import annotations

import subprocess
import sys

from vertexdist.emulator.capacity import ReplicaFault
from vertexdist.emulator.preemption import Preemptions

IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)"
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_sigterm_after_then_sigkill_after_the_grace() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", IGNORES_SIGTERM], start_new_session=True, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdout.readline()  # its SIGTERM handler is set
    clock = Clock()
    p = Preemptions([ReplicaFault("workerpool0-0", 2.0, 5.0, False, "preempt")], clock)
    try:
        assert not p.tick({"workerpool0-0": proc.pid}) and p.preempted is None  # seen at t=0
        clock.now = 2.0
        assert not p.tick({"workerpool0-0": proc.pid}) and p.preempted == "workerpool0-0"  # SIGTERM
        clock.now = 4.0
        assert not p.tick({"workerpool0-0": proc.pid}) and proc.poll() is None  # ignored; grace not over
        clock.now = 7.0
        assert p.tick({"workerpool0-0": proc.pid})
        assert proc.wait(10) == -9  # SIGKILL
    finally:
        proc.kill()
        proc.wait()


def test_a_replica_that_left_on_sigterm_is_not_killed_again() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    clock = Clock()
    p = Preemptions([ReplicaFault("workerpool0-0", 0.0, 30.0, False, "preempt")], clock)
    try:
        assert not p.tick({"workerpool0-0": proc.pid})
        assert proc.wait(10) == -15  # SIGTERM ended it
        assert p.tick({})  # gone before the grace: done, and no SIGKILL sent to its (reusable) pid
    finally:
        proc.kill()
        proc.wait()


def test_a_replica_not_running_yet_is_not_signalled() -> None:
    p = Preemptions([ReplicaFault("workerpool1-0", 0.0, 1.0, False, "preempt")], Clock())
    assert not p.tick({"workerpool0-0": 1}) and p.preempted is None


def test_a_restarting_fault_tells_the_job_first_and_never_fails_it() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", IGNORES_SIGTERM], start_new_session=True, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdout.readline()
    told: list[tuple[str, int, bool]] = []

    def notice(name: str, pid: int, why: str) -> bool:
        told.append((name, pid, proc.poll() is None))  # before its SIGTERM: still running
        return "maintenance" in why

    clock = Clock()
    p = Preemptions([ReplicaFault("workerpool0-0", 1.0, 2.0, True, "maintenance")], clock, stop_notice=notice)
    try:
        assert not p.tick({"workerpool0-0": proc.pid}) and not told
        clock.now = 1.0
        assert not p.tick({"workerpool0-0": proc.pid})
        assert told == [("workerpool0-0", proc.pid, True)] and p.restarted == ["workerpool0-0"]
        clock.now = 3.5
        assert not p.tick({"workerpool0-0": proc.pid})  # SIGKILL after the grace, but the job goes on
        assert proc.wait(10) == -9
        assert p.preempted is None and not p.tick({"workerpool0-0": proc.pid + 1})  # the restarted one
    finally:
        proc.kill()
        proc.wait()


def test_a_step_aimed_fault_comes_due_when_its_replica_reached_the_step_whatever_the_time() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    reached: set[str] = set()
    clock = Clock()
    fault = ReplicaFault("workerpool0-0", 0.0, 30.0, False, "preempt", after_step=70)
    assert fault.aim() == {"kind": "preempt", "replica": "workerpool0-0", "local_rank": 0, "after_step": 70}
    p = Preemptions([fault], clock, reached=reached.__contains__)
    try:
        clock.now = 1000.0
        assert not p.tick({"workerpool0-0": proc.pid}) and p.preempted is None  # long past `after`: not due
        reached.add("workerpool0-0")
        assert not p.tick({"workerpool0-0": proc.pid}) and p.preempted == "workerpool0-0"  # SIGTERM
        assert proc.wait(10) == -15
    finally:
        proc.kill()
        proc.wait()
    assert ReplicaFault("workerpool0-0", 0.0, 30.0, False, "preempt").aim() is None
