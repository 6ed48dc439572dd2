"""What torchrun starts per local rank: `python -m vertexdist_launcher.worker (-m MODULE | SCRIPT) ARGS`.

It ties the process to the launcher first, then runs the user's code exactly as `python -m MODULE ARGS`
(or `python SCRIPT ARGS`) would. torchrun starts each worker in a session of its own, so nothing else
stops a worker whose torchrun was SIGKILLed (a local run's grace period running out, the OOM killer).
An exception that ends the user's code goes into torchrun's error file for this rank (what torch's
`@record` writes), so the failure summary shows it without the user decorating anything.

Once the user's code ends, the worker ends as `python` would look from outside (the exit status Python gives,
non-daemon threads joined, atexit handlers run, stdout and stderr flushed), then leaves with `os._exit`
rather than through interpreter shutdown, where torch's gloo threads can abort a script that succeeded
(`fork_protocol.end_process`; docs/launchers/torchrun.md, "Ending a script safely").
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import NoReturn

from . import health, whole_lines
from .fork_protocol import end_process, run_as_python
from .options import LauncherUsageError, Target, parse_target

PARENT_VARIABLE = "VERTEXDIST_LAUNCHER_PID"
ERROR_FILE_VARIABLE = "TORCHELASTIC_ERROR_FILE"  # set by torchrun for each local rank
_PR_SET_PDEATHSIG = 1


def watch_parent(env: Mapping[str, str]) -> None:
    """Get SIGKILL when the launcher (torchrun, this process's parent) dies, however it dies (Linux)."""
    expected = env.get(PARENT_VARIABLE, "")
    if not expected.isdigit():
        return
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != int(expected):  # the launcher died before the prctl above took effect
        os._exit(1)


def run_target(target: Target) -> None:
    """Run `target` in this interpreter as `python -m` / `python SCRIPT` would, as `__main__`."""
    if target.module is not None:
        sys.argv = [target.module, *target.args]
        runpy.run_module(target.module, run_name="__main__", alter_sys=True)
        return
    script = os.path.abspath(str(target.script))
    sys.argv = [str(target.script), *target.args]
    sys.path[0] = os.path.dirname(script)
    runpy.run_path(script, run_name="__main__")


def record_error(error: BaseException, env: Mapping[str, str], variable: str = ERROR_FILE_VARIABLE) -> None:
    """Write `error` to the error file `variable` names (torchrun's for this rank), in the shape torch's
    `@record` writes."""
    path = env.get(variable)
    if not path:
        return
    data = {
        "message": {
            "message": f"{type(error).__name__}: {error}",
            "extraInfo": {"py_callstack": traceback.format_exc(), "timestamp": str(int(time.time()))},
        }
    }
    try:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
    except OSError:
        pass  # the traceback still reaches the log


def main(argv: Sequence[str]) -> None:
    watch_parent(os.environ)
    whole_lines.install()  # ranks sharing a replica's log never join each other's lines
    health.start(os.environ)  # the rank's watcher: steps, where it is, heartbeats (health.py)
    try:
        target = parse_target(argv)
    except LauncherUsageError as exc:
        print(f"vertexdist_launcher.worker: {exc}", file=sys.stderr)
        sys.exit(2)
    try:
        run_target(target)
    except Exception as exc:
        record_error(exc, os.environ)
        raise


def run_and_exit(argv: Sequence[str]) -> NoReturn:
    """`main(argv)` as `python -m vertexdist_launcher.worker ARGS` runs it, ended by `end_process`."""
    end_process(run_as_python(lambda: main(argv), own_files={__file__}))


if __name__ == "__main__":
    run_and_exit(sys.argv[1:])
