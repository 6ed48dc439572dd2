"""What the launcher says when torchrun ends because a local rank failed. Pure.

The last line names the replica, the local (and global) rank that failed first and how it ended, so that
the last lines of a replica's log (all a job summary shows) say which process broke.
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


def _what(failure: WorkerFailure) -> str:
    return (
        f"local rank {failure.local_rank} (global rank {failure.global_rank}) "
        f"{describe_exit(failure.exitcode)} (pid {failure.pid})"
    )


def failure_lines(replica: str, failures: Sequence[WorkerFailure], first: WorkerFailure) -> list[str]:
    """Lines for the log: the other failed ranks, the first one's error message, then the first one."""
    lines = [f"{replica}: also ended: {_what(f)}" for f in failures if f != first]
    message = first.message.strip().splitlines()
    if message:
        lines.append(f"{replica}: local rank {first.local_rank}: {message[-1]}")
    lines.append(f"{replica} failed: {_what(first)}")
    return lines
