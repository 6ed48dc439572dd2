"""How the driver's end reaches every node, and what each replica then does and says. Pure.

The head writes the driver's outcome into the Ray cluster's own key-value store (the GCS) before it stops
anything; a worker node polls it. A worker exits 0 only after reading a success there: a head that is
gone without having written one (its machine lost, its launcher killed) fails the worker too, after
HEAD_LOST_S of not reaching it, so a worker neither reports success for a failed driver nor waits for
a head that will not come back. After a failed driver each worker acknowledges the outcome and waits for
the head's launcher to end first (its log says why the job failed; a socket it holds open closes when it
exits), then stops too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from .failures import describe_exit

NAMESPACE = b"vertexdist"
OUTCOME_KEY = b"driver-outcome"
ACK_PREFIX = b"outcome-read-by-node-"
HEAD_LOST_S = 10.0  # a head not reached for this long is gone (its GCS answers within a second when up)
ACK_WAIT_S = 10.0  # after a failed driver, how long the head waits for the workers to read the outcome


@dataclass(frozen=True)
class Outcome:
    """How the driver ended: its exit status and, for a failure, its error's last line."""

    exit_code: int
    message: str = ""
    replica: str = "workerpool0-0"
    watch_port: int = 0  # open on the head while its launcher lives (0: none)

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0

    def encode(self) -> bytes:
        return json.dumps(
            {
                "exit_code": self.exit_code,
                "message": self.message,
                "replica": self.replica,
                "watch_port": self.watch_port,
            }
        ).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Outcome:
        """The outcome the head wrote; anything unreadable counts as a failure, never as a success."""
        try:
            data = json.loads(raw)
            return cls(
                int(data["exit_code"]),
                str(data.get("message", "")),
                str(data["replica"]),
                int(data.get("watch_port", 0)),
            )
        except (ValueError, KeyError, TypeError):
            return cls(1, f"unreadable driver outcome {raw[:80]!r}")


def last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1].strip() if lines else ""


def driver_failure_lines(replica: str, outcome: Outcome, command: str, pid: int) -> list[str]:
    """The head's last log lines for a failed driver: its error, then what ended (failures.py style)."""
    lines = [f"{replica}: the Ray driver: {outcome.message}"] if outcome.message else []
    ended = describe_exit(outcome.exit_code)
    lines.append(f"{replica} failed: the Ray driver `{command}` {ended} (pid {pid})")
    return lines


Action = Literal["wait", "succeed", "fail"]


@dataclass(frozen=True)
class WorkerVerdict:
    action: Action
    line: str = ""  # what the worker says when it acts


def worker_verdict(
    replica: str,
    *,
    node_exit: int | None,
    outcome: Outcome | None,
    head_unreachable_s: float | None,
    head: str,
) -> WorkerVerdict:
    """What a worker node's launcher does next, from what it sees: its own `ray start` (None: running),
    the outcome the head wrote (None: none yet), and for how long the head has not answered (None: it
    answers). An outcome wins over a node stopping after it: the head's end takes the cluster down."""
    if outcome is not None:
        if outcome.succeeded:
            return WorkerVerdict("succeed", f"{replica}: the Ray driver on {outcome.replica} succeeded")
        return WorkerVerdict(
            "fail",
            f"{replica} failed: the Ray driver on {outcome.replica} {describe_exit(outcome.exit_code)}"
            + (f": {outcome.message}" if outcome.message else ""),
        )
    if node_exit is not None:
        return WorkerVerdict(
            "fail", f"{replica} failed: its Ray node stopped: `ray start` {describe_exit(node_exit)}"
        )
    if head_unreachable_s is not None and head_unreachable_s >= HEAD_LOST_S:
        return WorkerVerdict(
            "fail",
            f"{replica} failed: the Ray head at {head} has not answered for {head_unreachable_s:.0f}s"
            " and left no driver outcome (its replica is gone)",
        )
    return WorkerVerdict("wait")
