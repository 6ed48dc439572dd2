"""The commands `submit` prints for a new job (`cli.submit_view.submitted_where`): each line says what it is
once the job has ended (after `--follow`), the outputs one included (issue 36)."""

from __future__ import annotations

from vertexdist.backends.config import Target
from vertexdist.cli.submit_view import submitted_where

NAME = "projects/p/locations/us-central1/trainingPipelines/123"


def test_after_follow_the_outputs_command_has_its_label() -> None:
    lines = submitted_where(NAME, Target("p", "us-central1"), flags=" --emulator", done=True)
    assert lines[0] == f"outputs: vertexdist outputs {NAME} --emulator --download DIR"
    assert all(line.split(":", 1)[0] in ("outputs", "logs", "status", "console") for line in lines), lines


def test_right_after_submit_it_continues_the_outputs_folder_line() -> None:
    lines = submitted_where(NAME, Target("p", "us-central1"))
    assert lines[0] == f"  vertexdist outputs {NAME} --download DIR"
