"""`python -m vertexdist_launcher.watched (-m MODULE | SCRIPT) ARGS`: the user's code with the rank's watcher.

What every replica of the user's own module runs under `launcher: python`: vertexdist's render names it as
the package's `pythonModule` with args `-m MODULE ARGS`, so Vertex runs it, and a local or emulator job's
replica runs it too (`vertexdist.local.plan`). The health watcher (`vertexdist_launcher.health`, a daemon
thread) starts first, then the user's code runs exactly as `python -m MODULE ARGS` (or `python SCRIPT ARGS`)
would, ending as `python` would look from outside (`fork_protocol.end_process`). The chief of a loopback
rendezvous runs `vertexdist_launcher.rendezvous_store` instead, which starts the watcher too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from . import health, whole_lines


def main(argv: Sequence[str], program: str = "vertexdist_launcher.watched") -> NoReturn:
    from .fork_protocol import end_process, run_as_python
    from .options import LauncherUsageError, parse_target
    from .worker import __file__ as worker_file
    from .worker import run_target

    try:
        target = parse_target(argv)
    except LauncherUsageError as exc:
        print(f"{program}: {exc}", file=sys.stderr)
        sys.exit(2)
    whole_lines.install()
    health.start(os.environ)
    end_process(run_as_python(lambda: run_target(target), own_files={__file__, worker_file}))


if __name__ == "__main__":
    main(sys.argv[1:])
