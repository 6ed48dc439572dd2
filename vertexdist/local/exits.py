"""Which replica exits are permanent under Vertex's restart rules (docs/reference/vertex.md §8.1). Pure.

Vertex restarts a worker that exits non-zero on the same VM, unless it failed with one of the *common errors*
of its training-service page, which are permanent and end the whole job. That page names error situations,
not exit codes; this is our reading of them as codes, chosen so that a job with a bug ends within seconds
and nothing that ended a local job before is restarted now:

- a replica the platform stopped (a Compute Engine maintenance event, a Spot VM reclaimed with
  `outcome: worker_restarts`) is restarted, whatever its exit code: the exit was not its own;
- exit 75 (`EX_TEMPFAIL`, sysexits.h: "temporary failure, the user is invited to retry") is restarted: it
  is the one code by which a program says a new try may succeed;
- every other non-zero exit is permanent: 1 (an ordinary Python exception; a missing module), 2 (a bad
  argument: argparse), 126/127 (a command that cannot run), and a death by signal, whether the runner sees
  it as -N (Popen) or 128+N (a shell or `docker run`): SIGKILL is what the kernel's OOM killer sends (an
  out-of-memory replica is one of the page's common errors), and a SIGTERM, SIGINT, SIGSEGV or SIGABRT
  that the platform did not send came from the job itself or from whoever runs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

EX_TEMPFAIL = 75  # sysexits.h


@dataclass(frozen=True)
class ExitRule:
    """One row of the table: which exits, whether they are permanent, and why."""

    exits: str
    permanent: bool
    reason: str


# The table docs/reference/vertex.md §8.1 shows (tests/local/test_exits.py holds the two equal).
EXIT_RULES: tuple[ExitRule, ...] = (
    ExitRule("any, after the platform stopped the replica", False, "maintenance or a reclaimed Spot VM"),
    ExitRule("75 (EX_TEMPFAIL)", False, "the program says a new try may succeed"),
    ExitRule("1", True, "an ordinary Python exception, a missing module"),
    ExitRule("2", True, "a bad argument (argparse)"),
    ExitRule("126, 127", True, "a command that cannot be run or is not there"),
    ExitRule("137 or -9 (SIGKILL)", True, "the OOM killer's signal: out of memory"),
    ExitRule("143 or -15 (SIGTERM), any other signal", True, "not sent by the platform"),
    ExitRule("any other non-zero exit", True, "the program chose to fail"),
)


def is_permanent(exit_code: int, *, stopped_by_platform: bool) -> bool:
    """Whether a replica's exit ends the job at once (Vertex's permanent error) rather than restarting it.

    An exit of 0 is not a failure and never permanent; a replica stopped by the platform never is either."""
    if stopped_by_platform or exit_code == 0:
        return False
    return exit_code != EX_TEMPFAIL


@dataclass(frozen=True)
class Exit:
    """One replica that failed at this moment, as the rules need it."""

    name: str
    exit_code: int
    stopped_by_platform: bool = False
    lost_peer: bool = False  # its last lines say another replica went away under it (`local.blame`)

    @property
    def restarts_on_its_own(self) -> bool:
        return not is_permanent(self.exit_code, stopped_by_platform=self.stopped_by_platform)


Action = Literal["restart", "retry_job", "fail"]


@dataclass(frozen=True)
class Decision:
    """What the runner does: restart `restart` in place, retry the whole job, or fail it naming `blame`."""

    action: Action
    blame: str
    restart: tuple[str, ...] = ()


def decide(
    failed: Sequence[Exit],
    cause: str,
    *,
    restarts: Mapping[str, int],
    limit: int,
    peer_restarted: bool = False,
) -> Decision:
    """Vertex's restart rules for the replicas of one attempt that failed at this moment (oldest exit first;
    `cause` is the one `local.blame` names), given each replica's restarts so far in this attempt and the
    limit per replica (0: retries disabled). `peer_restarted`: a replica of this attempt was restarted or is
    being stopped by the platform, so one that only lost its peer went down with it, not on its own.

    - any permanent exit fails the job, naming the cause if it is one, else the first permanent exit;
    - with no restarts allowed, the job fails naming the cause;
    - a replica whose restarts are spent retries the whole job, naming it;
    - else every failed replica is restarted: one that failed on its own terms, and one that only lost its
      peer when that peer (the cause, or a replica restarted before) is being restarted.
    """
    if not failed:
        raise ValueError("no failure to decide on")
    by_name = {f.name: f for f in failed}
    first = by_name.get(cause, failed[0])
    peers_back = first.restarts_on_its_own or peer_restarted
    permanent = [f for f in failed if not (f.restarts_on_its_own or (peers_back and f.lost_peer))]
    if permanent:
        return Decision("fail", first.name if first in permanent else permanent[0].name)
    if limit <= 0:
        return Decision("fail", first.name)
    spent = [f for f in failed if restarts.get(f.name, 0) >= limit]
    if spent:
        return Decision("retry_job", spent[0].name)
    return Decision("restart", first.name, tuple(f.name for f in failed))
