"""Which replica a failed job names: the one that failed first, not one that only lost its peer. Pure.

When one replica dies, its peers lose their connections at once (gloo: "Connection closed by peer" or
"reset by peer"; NCCL: "communicator was aborted") and fail too, all within milliseconds. The order in
which their processes then *exit* says little: each replica's launcher tears down its interpreter (torch
and all) after it noticed, which takes tens to hundreds of milliseconds. Measured on the bundled trainer
with workerpool1-0's worker killed (`kill -9`): the chief, which only lost its peer, exited first in 5 of 6
runs, by 7 to 420 ms. So among the failures of one moment, a replica whose last lines say it lost a peer
is a consequence; the first by exit time of the others is the cause. When all of them (or none) lost a
peer, the first by exit time is named. The runner waits longer for the cause while it has seen only
consequences (`needs_cause`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# What a rank prints when another rank died under it; the trainer tells the same apart within a node
# (trainer_pkg/errors.py), this tells it apart between replicas.
LOST_PEER = (
    "closed by peer",
    "reset by peer",
    "broken pipe",
    "connection refused",
    "communicator was aborted",
    "remote process exited",
    # The bundled trainer's chief, stopped with a checkpoint because a peer node got SIGTERM
    # (trainer_pkg/launch.py): a consequence of that peer's stop, as a lost connection is.
    "another node was asked to stop",
)
TAIL = 5
# The line the runner writes into every replica's log before a restarted attempt's output.
RESTART_MARK = "----- vertexdist: job restart"
# ... and into one replica's log before its output once it was restarted on its own (`local.exits`).
REPLICA_RESTART_MARK = "----- vertexdist: replica restart"


@dataclass(frozen=True)
class Failure:
    """One replica that exited non-zero: when its exit was reaped, and the last lines of its log."""

    name: str
    exited_at: float
    last_lines: Sequence[str] = ()


def lost_a_peer(lines: Sequence[str]) -> bool:
    """Whether the last lines of a replica's log (this attempt's) say it failed because another went away."""
    marks = [i for i, line in enumerate(lines) if line.startswith((RESTART_MARK, REPLICA_RESTART_MARK))]
    attempt = lines[marks[-1] + 1 :] if marks else lines
    tail = [line.lower() for line in attempt if line.strip()][-TAIL:]
    return any(marker in line for line in tail for marker in LOST_PEER)


def first_failure(failures: Sequence[Failure]) -> Failure:
    """The failure to name: the earliest that did not only lose a peer, else the earliest."""
    if not failures:
        raise ValueError("no failure to name")
    by_time = sorted(failures, key=lambda f: f.exited_at)
    causes = [f for f in by_time if not lost_a_peer(f.last_lines)]
    return (causes or by_time)[0]


def needs_cause(failures: Sequence[Failure]) -> bool:
    """Whether every failure seen so far only lost a peer: the replica that caused them is still to exit."""
    return all(lost_a_peer(f.last_lines) for f in failures)
