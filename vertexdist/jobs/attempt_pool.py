"""The warm pool a managed local run's controller keeps for its job, so that a recovery starts warm.

A preempted attempt's next one would otherwise start cold: new interpreters, torch imported again. The
controller (`cli.local_managed.drive_local`) starts one `OwnedPool` in the background as it starts its first
attempt; every attempt made once the pool answers forks its replicas from it (torch, the bundled trainer and
the shipped launcher already imported; the package is in the shared cache after the first attempt), and the
bundled trainer resumes from the checkpoint it wrote on SIGTERM. An attempt made before the pool answers,
or where it could not start, starts cold, as without it. The pool goes with the controller: stopped at its
end, and gone with it if it is killed (`OwnedPool`'s owner pipe).

Not started where it cannot help: a job the user runs warm already (`--warm`: the shared pool) or in
containers (`--docker`: replicas are not forked).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vertexdist.local.warm_pool import OwnedPool


class AttemptPool:
    """An `OwnedPool` started on a thread of its own; `socket()` is its address once it answers."""

    def __init__(self) -> None:
        self._pool: OwnedPool | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._stopped = False
        self.error: str | None = None  # why the pool could not start (attempts then start cold)

    def start(self) -> AttemptPool:
        # Imported here, on the caller's thread, not on the pool's: the caller goes on to import
        # `vertexdist.local` for its first attempt, and two threads importing that package's cycle at once
        # can hand one of them a half-initialised module (an ImportError of `recorder`, bench_recovery).
        from vertexdist.local.warm_pool import OwnedPool

        threading.Thread(target=self._start, args=(OwnedPool,), name="attempt-pool", daemon=True).start()
        return self

    def _start(self, owned_pool: type[OwnedPool]) -> None:
        pool = owned_pool(0)
        try:
            pool.start()
        except Exception as exc:  # the attempts start cold, as without a pool
            self.error = str(exc)
            return
        with self._lock:
            if self._stopped:  # the controller ended while the pool was starting
                pool.stop()
                return
            self._pool = pool
        self._ready.set()

    def socket(self) -> Path | None:
        """The pool's socket if it answers now; None while it starts (or if it could not)."""
        with self._lock:
            return self._pool.path if self._ready.is_set() and self._pool is not None else None

    def wait_ready(self, timeout_s: float) -> bool:
        return self._ready.wait(timeout_s)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop()
