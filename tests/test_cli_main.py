"""The CLI entry point: help, version, and the single error boundary."""

from __future__ import annotations

import re
import subprocess
import sys
import time

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


def _command_paths() -> list[tuple[str, ...]]:
    import typer

    main._register()
    root = typer.main.get_command(main.app)
    paths: list[tuple[str, ...]] = []

    def walk(command: object, path: tuple[str, ...]) -> None:
        children = getattr(command, "commands", None)
        if children is None:
            paths.append(path)
            return
        for name, child in children.items():
            if not name.endswith("-for-test"):
                walk(child, (*path, name))

    walk(root, ())
    return paths


_TYPE_METAVAR = re.compile(r"^\s+(?:-\w, )?(?:--[\w-]+|\w+(?:\.\.\.)?) [<{]")


def test_help_metavars_read_like_gcloud() -> None:
    # Issue 27: `--help` read `{paths}...`, `<list[str]>`, `<int range>`.
    from typer.testing import CliRunner

    runner = CliRunner()
    helps = {}
    for path in _command_paths():
        result = runner.invoke(main.app, [*path, "--help"], prog_name="vertexdist")
        assert result.exit_code == 0, (path, result.output)
        helps[" ".join(path)] = result.output
        usage = result.output.splitlines()[0]
        assert "{" not in usage and "<" not in usage, usage
        assert not [line for line in result.output.splitlines() if _TYPE_METAVAR.match(line)], result.output
    assert helps["validate"].startswith("Usage: vertexdist validate [OPTIONS] PATH...\n")
    assert helps["local-run"].startswith("Usage: vertexdist local-run [OPTIONS] TEMPLATE\n")
    assert "--procs-per-replica N " in helps["local-run"]
    assert "--project PROJECT_ID " in helps["submit"]
    assert "--transport grpc|rest " in helps["list"]
    assert "\n  JOB  " in helps["status"]
    # Issue 27: `list` and `trials --help` spoke of "the template's" project though they take no template.
    for command in ("list", "trials", "status", "logs", "outputs", "cancel"):
        assert "template" not in helps[command], command


def test_an_interrupted_run_exits_130_even_while_a_library_thread_lives_on() -> None:
    # A transport thread that never ends would keep the interpreter joining it after Ctrl-C (seen once under
    # `logs --follow` in CI); the CLI still ends, with 130, within its grace.
    script = (
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(120,)).start()\n"
        "from vertexdist.cli.main import exit_interrupted\n"
        "exit_interrupted(grace_s=0.5)\n"
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130
    assert done.stderr.strip() == "interrupted"
    assert time.monotonic() - started < 30


def test_running_many_commands_in_one_process_registers_each_command_once() -> None:
    # Each in-process run registered every command again: the 60th run built 60 copies of each, and the
    # suite's help test took 103 s of CPU in a worker that had run many commands before it (2.7 s alone).
    main._app_for(["list"])
    count = len(main.app.registered_commands)
    for args in (["list"], ["status", "x"], []):
        assert main._app_for(args) is main.app
    assert len(main.app.registered_commands) == count
    names = [command.name for command in main.app.registered_commands]
    assert len(names) == len(set(names))
