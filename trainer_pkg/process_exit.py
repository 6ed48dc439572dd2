"""How a trainer worker process ends: as a normal exit looks from outside, then `os._exit`. Standard library
only (the launcher's forked workers use it without importing torch).

A normal exit's visible parts are done here: non-daemon threads joined (`threading._shutdown`), atexit
handlers run, stdout and stderr flushed. Interpreter shutdown is skipped: it is where a script that
succeeded could still crash or hang. A gloo thread that frees an all-reduce started inside backward needs
the GIL, and Python 3.11 ends a thread that asks for it during shutdown with `pthread_exit`, which unwinds
through a `noexcept` destructor into `std::terminate` (SIGABRT); freeing DDP's gloo process group after the
peers had exited was also seen to hang.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    """End the process with status `code`: threads joined, atexit handlers run, stdio flushed, no shutdown."""
    with contextlib.suppress(Exception):
        threading._shutdown()  # type: ignore[attr-defined]  # what Python's exit does first
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
