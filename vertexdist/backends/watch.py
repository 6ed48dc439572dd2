"""Following a job: poll its state with backoff (not the SDK's fixed 5 s), optionally stream its logs."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from vertexdist.backends.base import Backend, JobStatus, LogChunk


@dataclass(frozen=True)
class PollPolicy:
    """Fast at first and after every state change, slower while nothing happens."""

    initial_s: float = 0.2
    max_s: float = 10.0
    multiplier: float = 1.5
    follow_max_s: float = 1.0  # while streaming logs, keep them flowing


def watch(
    backend: Backend,
    name: str,
    *,
    on_status: Callable[[JobStatus], None],
    on_logs: Callable[[LogChunk, JobStatus], None] | None = None,
    policy: PollPolicy | None = None,
    until: Callable[[JobStatus], bool] = lambda status: status.done,
    sleep: Callable[[float], None] = time.sleep,
) -> JobStatus:
    """Poll `name` until `until(status)` (default: a final state); returns the last status seen."""
    policy = policy or PollPolicy()
    cap = policy.follow_max_s if on_logs is not None else policy.max_s
    delay = policy.initial_s
    last_state = ""
    offsets: dict[str, int] = {}
    while True:
        status = backend.describe(name)
        if status.state != last_state:
            delay = policy.initial_s
            last_state = status.state
        on_status(status)
        if on_logs is not None:
            page = backend.logs(name, offsets)
            for chunk in page.chunks:
                if chunk.text:
                    on_logs(chunk, status)
            offsets.update(page.offsets())
        if until(status):
            return status
        sleep(delay)
        delay = min(cap, delay * policy.multiplier)
