"""The controller's warm pool (`jobs.attempt_pool`) imports its module on the caller's thread: the caller goes
on to import `vertexdist.local` for its first attempt, and a second thread importing the same package cycle at
once got a half-initialised module (`cannot import name 'recorder'`, an internal error of a managed
`local-run`, seen in bench_recovery under load)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A fresh interpreter: the pool's thread is never started (nothing forks), and the module must be loaded by
# the time start() returns.
CHECK = """\
import sys, threading
from vertexdist.jobs.attempt_pool import AttemptPool
assert "vertexdist.local.warm_pool" not in sys.modules
threading.Thread.start = lambda self: None
AttemptPool().start()
print("vertexdist.local.warm_pool" in sys.modules)
"""


def test_the_pool_module_is_imported_before_its_thread_starts() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, capture_output=True, text=True
    )
    assert done.stdout.strip() == "True", done.stderr
