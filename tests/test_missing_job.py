"""A job that is not there ends every day-two command the same way: exit 1, as a failed lookup (Vertex's 404)
does, with the place to look in the hint; 2 stays for a command line that is wrong (issue 42, item 13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertexdist.cli import main


@pytest.mark.parametrize("command", ["ranks", "describe", "rerun", "status"])
def test_a_missing_emulator_job_exits_1_whichever_command_asks(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "emulator"
    folder.mkdir()
    with pytest.raises(SystemExit) as ended:
        main.run([command, "12345", "--emulator", "--emulator-data-dir", str(folder)])
    err = capsys.readouterr().err
    assert ended.value.code == 1, err
    assert "12345" in err and "vertexdist list --emulator" in err
