"""A job's own lines in its page's timeline, by kind (issue 42, item 13): a straggler's warning is no hang,
and is not drawn in a hang's red. Pure."""

from __future__ import annotations

from vertexdist.console.notes import note_kind
from vertexdist.health.silence import SILENCE_HEAD
from vertexdist.health.verdict import Straggler, straggler_line


def test_a_hang_a_straggler_and_a_silent_job_are_told_apart() -> None:
    straggler = Straggler(rank=2, slowdown=3.0, steps=20, state="computing", where="step (train.py:9)")
    warning = straggler_line(straggler, {"replica": "workerpool0-1", "local_rank": 0, "step": 30})
    assert note_kind(warning) == "straggler"
    assert note_kind("hung: no progress for 61s; rank 1 is in step (train.py:9) at step 5") == "hang"
    assert note_kind(SILENCE_HEAD + "300s") == "silence"
    assert note_kind("The replica workerpool0-0 restarted.") == ""
