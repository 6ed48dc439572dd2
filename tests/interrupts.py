"""How a test starts a command it will interrupt with Ctrl-C (SIGINT): as a shell would start it.

A shell starts a command with SIGINT at its default, and Python then installs its KeyboardInterrupt handler;
a child inherits an ignored SIGINT, though, and Python leaves it ignored. In the whole suite, a pytest
worker was seen to reach these tests with SIGINT ignored, and every Ctrl-C test in that worker then waited
out its timeout. Starting the command with SIGINT at its default and unblocked tests what a user's Ctrl-C
does; tests/conftest.py also names (a warning) and undoes any test that leaves SIGINT ignored or blocked.
"""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """A `preexec_fn`: SIGINT at its default disposition and unblocked in the child, as from a shell."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
