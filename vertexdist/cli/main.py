"""The `vertexdist` entry point and its single error boundary.

Command modules are imported here, so each must stay light at import time: heavy libraries
(google-cloud-aiplatform, torch) are imported inside the command functions that need them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

import typer

from vertexdist import __version__
from vertexdist.errors import VertexdistError

_APP_SETTINGS: dict[str, object] = {
    "name": "vertexdist",
    "help": (
        "One YAML template to a distributed PyTorch (DDP) job on Vertex AI,"
        " and the same job on your machine first."
    ),
    "no_args_is_help": True,
    "add_completion": True,
    "pretty_exceptions_enable": False,
    "rich_markup_mode": None,
}
app = typer.Typer(**_APP_SETTINGS)  # type: ignore[arg-type]
# Commands whose own module is all `vertexdist CMD ...` needs: run first on the command line, only that module
# is imported and only its command built. Registering them all imports every command module (the backends
# among them) and typer converts every command's signature on each call: most of a cold `vertexdist
# validate`, which runs in pre-commit hooks and CI.
ALONE = {"validate": "vertexdist.cli.validate"}

_state = {"debug": False}

# After Ctrl-C the interpreter still joins every non-daemon thread before it exits; a client library's
# transport thread that never ends (seen once in CI under `logs --follow`) would keep the CLI alive. So an
# interrupted run is given this long to exit normally (atexit handlers included), then ends at once.
INTERRUPT_EXIT_GRACE_S = 5.0
INTERRUPTED_EXIT_CODE = 130


def exit_interrupted(grace_s: float = INTERRUPT_EXIT_GRACE_S) -> None:
    """End an interrupted run with exit 130: normally if it can, at the latest `grace_s` later."""
    print("interrupted", file=sys.stderr)

    def force_exit() -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(INTERRUPTED_EXIT_CODE)

    timer = threading.Timer(grace_s, force_exit)
    timer.daemon = True
    timer.start()
    sys.exit(INTERRUPTED_EXIT_CODE)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"vertexdist {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks for errors."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    _state["debug"] = debug


def _register() -> None:
    """Every command onto `app`, once per process: typer appends what it is given, so a second call would
    add every command again, and each later run would build them all twice over (a program or a test suite
    that calls `run` many times in one process slowed down with each call)."""
    if _state.get("registered"):
        return
    # One line per command module; each module exposes `register(app)`.
    from vertexdist.cli import commands, help_format

    for module in commands.MODULES:
        module.register(app)
    help_format.use_for(app)
    _state["registered"] = True


def _report(error: VertexdistError) -> None:
    message = error.message if error.message.startswith("error") else f"error: {error.message}"
    print(message, file=sys.stderr)
    if error.hint:
        print(f"hint: {error.hint}", file=sys.stderr)


def _app_for(args: list[str]) -> typer.Typer:
    """The app that runs `args`: one holding only the command they name first when it is in ALONE (with
    the root's options), else every command."""
    if not args or args[0] not in ALONE:
        _register()
        return app
    import importlib

    from vertexdist.cli import help_format

    alone = typer.Typer(**_APP_SETTINGS)  # type: ignore[arg-type]
    alone.callback()(_root)
    importlib.import_module(ALONE[args[0]]).register(alone)
    help_format.use_for(alone)
    return alone


def run(argv: list[str] | None = None) -> None:
    """Console-script entry: run the app, turn library errors into messages and exit codes.

    typer (standalone mode) handles usage errors (exit 2) and `typer.Exit`; everything else that
    escapes a command lands here.
    """
    args = sys.argv[1:] if argv is None else argv
    application = _app_for(args)
    _state["debug"] = "--debug" in args
    try:
        application(args=args, prog_name="vertexdist")
    except VertexdistError as exc:
        if _state["debug"]:
            raise
        _report(exc)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        exit_interrupted()
    except Exception as exc:
        if _state["debug"]:
            raise
        print(f"error: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print("hint: run again with --debug for the traceback, and report it", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    run()
