"""The CLI entry point: help, version, and the single error boundary."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vertexdist.cli import main
from vertexdist.errors import UsageError, VertexdistError


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vertexdist", *args], capture_output=True, text=True, timeout=60
    )


def test_help_lists_usage_and_exits_zero() -> None:
    result = _run("--help")
    assert result.returncode == 0
    assert "Usage: vertexdist" in result.stdout


def test_unknown_command_is_a_usage_error() -> None:
    result = _run("no-such-command")
    assert result.returncode == 2
    assert "No such command" in result.stderr


def test_library_errors_become_one_message_and_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    @main.app.command("explode-for-test")
    def _explode() -> None:
        raise UsageError("the flag --x needs a value", hint="pass --x 3")

    with pytest.raises(SystemExit) as exit_info:
        main.run(["explode-for-test"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines() == ["error: the flag --x needs a value", "hint: pass --x 3"]
    assert "Traceback" not in err


def test_unexpected_errors_hide_the_traceback_unless_debug(capsys: pytest.CaptureFixture[str]) -> None:
    @main.app.command("crash-for-test")
    def _crash() -> None:
        raise ValueError("boom")

    with pytest.raises(SystemExit) as exit_info:
        main.run(["crash-for-test"])
    assert exit_info.value.code == 1
    assert "internal error: ValueError: boom" in capsys.readouterr().err
    with pytest.raises(ValueError):
        main.run(["--debug", "crash-for-test"])


def test_vertexdist_error_defaults_to_exit_one() -> None:
    assert VertexdistError("x").exit_code == 1
