"""The lines the trainer logs when it stops on SIGTERM and when it resumes, and the steps a run of attempts
lost between them (pure): what a preemption cost, read from the attempts' chief logs in order."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

STOPPED = "stopping on request after step {step}; checkpoint saved"
_STOPPED = re.compile(r"stopping on request after step (\d+)")
_RESUMED = re.compile(r"resumed from .*step (\d+)\s*$", re.M)


class ResumeMissing(ValueError):
    """An attempt stopped on SIGTERM after training, and the next one did not say where it resumed."""


def steps_lost(logs: Sequence[str]) -> list[int]:
    """For each attempt that stopped on SIGTERM after training: the steps between its checkpoint and where
    the next attempt resumed (0 when nothing was lost). An attempt preempted before it trained, or the last
    one, counts nothing."""
    lost = []
    for stopped, resumed in itertools.pairwise(logs):
        at = _STOPPED.search(stopped)
        if at is None:
            continue
        back = _RESUMED.search(resumed)
        if back is None:
            raise ResumeMissing(f"the attempt after one stopped at step {at.group(1)} did not resume")
        lost.append(int(at.group(1)) - int(back.group(1)))
    return lost
