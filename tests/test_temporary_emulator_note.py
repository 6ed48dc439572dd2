"""A command that starts an emulator of its own says so before the seconds that takes (issue 42, item 9:
`status --emulator` and `models`, `experiments` were silent for 2.4-9.8 s with no emulator up)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertexdist.jobs.where import JobPlace, reach


def test_reaching_an_emulator_that_is_not_up_says_it_starts_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "emulator"
    with reach(JobPlace(emulator_dir=folder), {}) as (reached, env):
        said = capsys.readouterr().err
        assert reached.endpoint is not None and reached.endpoint.startswith("http://127.0.0.1:")
        assert "STORAGE_EMULATOR_HOST" in env
    assert f"starting an emulator over {folder} for this command" in said, said
    assert "vertexdist emulator start" in said  # how to keep one up instead
