"""What the launcher says when torchrun ends because a local rank failed. Pure.

The last line names the replica, the local (and global) rank that failed first and how it ended, so that
the last lines of a replica's log (all a job summary shows) say which process broke. When that rank died of
SIGABRT, a hint just before it says what that usually is: torch's native code aborting the process
(`terminate called without an active exception`) because a process group was torn down, or the process ended,
while a collective or the group's own threads were still at work. It does not promise that a barrier prevents
it: the commonest case, gloo's threads at interpreter shutdown, no barrier can prevent, and the launcher's
worker already avoids it by ending with `os._exit` (docs/launchers/torchrun.md, "Ending a script safely").
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class WorkerFailure:
    """One local rank that failed: torchrun's ProcessFailure, as plain data."""

    global_rank: int
    local_rank: int
    pid: int
    exitcode: int
    message: str = ""  # from the worker's error file, when it wrote one


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


# How a rank that died of SIGABRT ends: killed by signal 6 (as torchrun sees a worker it started
# directly), or a shell's 128 + 6 when something in between ran it.
SIGABRT_EXITS = (-int(signal.SIGABRT), 128 + int(signal.SIGABRT))
ABORT_HINT = (
    "SIGABRT usually comes from torch's native code: a process group torn down (or its process ending) "
    "while a collective or the group's own threads were still at work. The launcher's worker ends without "
    "interpreter shutdown, where gloo's threads abort most often, so look above for what the rank was doing; "
    "a rank that tears its group down while a peer is mid-collective needs dist.barrier() first "
    "(vertexdist docs: launchers/torchrun.md, Ending a script safely)"
)


def aborted(failure: WorkerFailure) -> bool:
    """Whether the rank died of SIGABRT (what a process group torn down under a peer looks like)."""
    return failure.exitcode in SIGABRT_EXITS


def _what(failure: WorkerFailure) -> str:
    return (
        f"local rank {failure.local_rank} (global rank {failure.global_rank}) "
        f"{describe_exit(failure.exitcode)} (pid {failure.pid})"
    )


def failure_lines(replica: str, failures: Sequence[WorkerFailure], first: WorkerFailure) -> list[str]:
    """Lines for the log: the other failed ranks, the first one's error message, a hint when it died of
    SIGABRT, then the first one."""
    lines = [f"{replica}: also ended: {_what(f)}" for f in failures if f != first]
    message = first.message.strip().splitlines()
    if message:
        lines.append(f"{replica}: local rank {first.local_rank}: {message[-1]}")
    if aborted(first):
        lines.append(f"{replica}: hint: {ABORT_HINT}")
    lines.append(f"{replica} failed: {_what(first)}")
    return lines
