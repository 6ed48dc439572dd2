"""A job's watchdog: takes the job's processes down when its supervisor dies, whatever killed it.

Replicas run in their own sessions (so stopping one reaches every worker it spawned), which also means
nothing ends them when `local-run` or the emulator is killed with SIGKILL. So each `LocalJob` starts one of
these small processes (stdlib only, run by path: it imports nothing of vertexdist) and keeps the write end
of a pipe whose read end only the watchdog holds. The write end is close-on-exec, as every descriptor
Python opens is, so no replica inherits it: the kernel closes it when the supervisor's process ends, for
any reason, and the watchdog reads EOF. Then it stops what the job registered over the pipe:

- `group PGID` / `ungroup PGID`: a replica's process group (ungrouped once the runner saw it gone, so
  a recycled id is never signalled);
- `stop ARGV-JSON`: a command to run after the processes are gone (`docker rm -f` of a replica container);
- every process whose environment carries the job's token (`VERTEXDIST_JOB_TOKEN`): workers that started
  a session of their own (ray's daemons, a torchrun agent's workers) are still the job's;
- `done`: the job ended normally; exit without touching anything.

Stopping is SIGTERM, up to `grace` seconds (at most 5, so it all ends within 10 s), then SIGKILL.
PR_SET_PDEATHSIG is not used: it fires when the *thread* that forked a child exits, and reaches only
direct children, so it cannot guard replicas started from a supervisor thread, nor their own children.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

TOKEN_VARIABLE = "VERTEXDIST_JOB_TOKEN"
JOB_TOKEN_FILE = "job-token"  # the token, in the run folder (0600): `vertexdist shell` finds replicas by it
MAX_GRACE_S = 5.0
STOP_COMMAND_TIMEOUT_S = 30.0
PROC = Path("/proc")


def _live_processes() -> list[tuple[int, int]]:
    """(pid, process group) of every live process; a zombie holds nothing."""
    found = []
    for entry in PROC.iterdir() if PROC.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) < 3 or fields[0] == "Z":
            continue
        found.append((int(entry.name), int(fields[2])))
    return found


def _carries_token(pid: int, marker: bytes) -> bool:
    try:
        return marker in (PROC / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:  # gone, or another user's
        return False


def job_processes(groups: Iterable[int], token: str) -> list[int]:
    """Live processes of the job: members of its registered groups, and carriers of its token."""
    wanted = set(groups)
    marker = f"{TOKEN_VARIABLE}={token}".encode()
    me = os.getpid()
    return [
        pid
        for pid, pgid in _live_processes()
        if pid != me and (pgid in wanted or (token and _carries_token(pid, marker)))
    ]


def _signal(groups: Iterable[int], pids: Iterable[int], sig: signal.Signals) -> None:
    for pgid in groups:
        with contextlib.suppress(OSError):
            os.killpg(pgid, sig)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def stop_job(groups: set[int], token: str, stop_commands: list[list[str]], grace_s: float) -> None:
    """SIGTERM everything of the job, wait up to `grace_s`, SIGKILL what is left, run the stop commands."""
    _signal(groups, job_processes(groups, token), signal.SIGTERM)
    deadline = time.monotonic() + min(grace_s, MAX_GRACE_S)
    while time.monotonic() < deadline and job_processes(groups, token):
        time.sleep(0.05)
    left = job_processes(groups, token)
    if left:
        _signal(groups, left, signal.SIGKILL)
    for argv in stop_commands:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=STOP_COMMAND_TIMEOUT_S,
                check=False,
            )


def watch(fd: int, token: str, grace_s: float, label: str) -> int:
    """Read registrations from `fd` until `done` (exit 0) or EOF (stop the job, exit 0)."""
    groups: set[int] = set()
    stop_commands: list[list[str]] = []
    with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as pipe:
        for line in pipe:
            verb, _, arg = line.strip().partition(" ")
            if verb == "done":
                return 0
            with contextlib.suppress(ValueError):
                if verb == "group":
                    groups.add(int(arg))
                elif verb == "ungroup":
                    groups.discard(int(arg))
                elif verb == "stop":
                    stop_commands.append([str(a) for a in json.loads(arg)])
    print(f"vertexdist: the supervisor of {label} is gone; stopping it", file=sys.stderr, flush=True)
    stop_job(groups, token, stop_commands, grace_s)
    return 0


class Watchdog:
    """The supervisor's side: start the watchdog, register the job's groups and stop commands, end it.

    `token` goes into every replica's environment (`TOKEN_VARIABLE`). Calls never raise: a watchdog that
    died on its own must not fail the job it guards.
    """

    def __init__(self, proc: subprocess.Popen[bytes], write_fd: int, token: str) -> None:
        self._proc = proc
        self._fd: int | None = write_fd
        self._lock = threading.Lock()
        self.token = token

    @classmethod
    def start(cls, *, grace_s: float, label: str) -> Watchdog:
        token = secrets.token_hex(12)
        read_fd, write_fd = os.pipe()  # both close-on-exec: only the watchdog gets the read end, by name
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", __file__, str(read_fd), token, f"{grace_s:g}", label],
                pass_fds=(read_fd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                # Its own session: a Ctrl-C or hang-up meant for the supervisor's group must not reach it.
                start_new_session=True,
            )
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        return cls(proc, write_fd, token)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _send(self, line: str) -> None:
        with self._lock:
            if self._fd is None:
                return
            with contextlib.suppress(OSError):
                os.write(self._fd, line.encode() + b"\n")

    def add_group(self, pgid: int) -> None:
        self._send(f"group {pgid}")

    def remove_group(self, pgid: int) -> None:
        self._send(f"ungroup {pgid}")

    def add_stop_command(self, argv: Sequence[str]) -> None:
        self._send("stop " + json.dumps(list(argv)))

    def close(self) -> None:
        """The job ended normally: the watchdog exits without stopping anything."""
        self._send("done")
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def main(argv: list[str]) -> int:
    fd, token, grace, label = int(argv[0]), argv[1], float(argv[2]), argv[3]
    # Terminal signals are for the supervisor, which stops the job itself; only EOF or `done` end this.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    return watch(fd, token, grace, label)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
