"""Steps lost per preemption, read from the trainer's own stop and resume lines (pure)."""

from __future__ import annotations

import pytest

from trainer_pkg.resume_lines import STOPPED, ResumeMissing, steps_lost

RESUMED = "resumed from /gcs/b/ckpt/step-{step:08d}/state.pt: epoch 2, 640 samples into it, step {step}\n"


def test_steps_lost_is_the_gap_between_each_stop_and_the_next_resume() -> None:
    first = "step 1\n" + STOPPED.format(step=40) + "\n"
    second = RESUMED.format(step=40) + STOPPED.format(step=75) + "\n"
    third = RESUMED.format(step=70) + "done\n"
    assert steps_lost([first, second, third]) == [0, 5]


def test_an_attempt_stopped_before_it_trained_loses_nothing_and_a_missing_resume_is_named() -> None:
    assert steps_lost(["preempted while loading data\n", RESUMED.format(step=0)]) == []
    with pytest.raises(ResumeMissing, match="stopped at step 12"):
        steps_lost([STOPPED.format(step=12), "started from scratch\n"])
