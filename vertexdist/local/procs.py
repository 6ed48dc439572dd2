"""Which processes are alive, read from Linux's /proc: the local runner uses it to tell when a replica's
process group is really gone, and the tests to prove that no replica or worker was left behind."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    state: str  # one letter, as in /proc/PID/stat ("R", "S", "Z", ...)
    ppid: int
    pgid: int


def live_processes() -> Iterator[ProcessInfo]:
    """Every process in /proc except zombies: reparented orphans that init has not reaped yet still show
    up (and answer `killpg(pgid, 0)`) but hold no resources. Yields nothing where there is no /proc."""
    if not PROC.is_dir():
        return
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = entry.joinpath("stat").read_text()
        except OSError:  # it exited while we looked
            continue
        # The command name (field 2) may hold spaces and parentheses; the fields after its last ")" do not.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) < 3 or fields[0] == "Z":
            continue
        yield ProcessInfo(pid=int(entry.name), state=fields[0], ppid=int(fields[1]), pgid=int(fields[2]))


def group_members(pgid: int) -> list[int]:
    """The live (non-zombie) processes of process group `pgid`."""
    return [p.pid for p in live_processes() if p.pgid == pgid]
