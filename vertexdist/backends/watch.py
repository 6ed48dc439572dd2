"""Following a job: poll its state with backoff (not the SDK's fixed 5 s), optionally stream its logs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from vertexdist.backends.base import Backend, JobStatus, LogChunk, LogQuery


@dataclass(frozen=True)
class PollPolicy:
    """Fast at first and after every state change, slower while nothing happens."""

    initial_s: float = 0.2
    max_s: float = 10.0
    multiplier: float = 1.5
    follow_max_s: float = 1.0  # while streaming logs, keep them flowing
    # Cloud Logging shows an entry a few seconds after it was written: read once more this long after the end.
    final_logs_after_s: float = 0.0


# Following logs in Cloud Logging: it allows 60 reads a minute per project, and shows an entry seconds after
# it was written (so one more read a little after the job ended).
CLOUD_LOGGING_POLICY = PollPolicy(initial_s=2.0, follow_max_s=5.0, final_logs_after_s=5.0)
# An emulator's job changes state within seconds and a Get of it costs a few ms of the local machine: poll
# it every 0.25 s at most, so that `submit --follow` learns of the end within 0.25 s of it (not up to 1 s:
# that wait was most of what submit added to a short job beyond the job itself, bench/bench_submit.py).
EMULATOR_POLICY = PollPolicy(initial_s=0.1, max_s=0.25, follow_max_s=0.25)


def follow_policy(is_emulator: bool, logs: bool) -> PollPolicy:
    """How `submit --follow` polls: an emulator closely; Vertex with backoff (logs: Cloud Logging's pace)."""
    if is_emulator:
        return EMULATOR_POLICY
    return CLOUD_LOGGING_POLICY if logs else PollPolicy()


def polls(
    backend: Backend,
    name: str,
    *,
    logs: bool,
    log_query: LogQuery | None = None,
    policy: PollPolicy | None = None,
    until: Callable[[JobStatus], bool] = lambda status: status.done,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[tuple[JobStatus, LogChunk | None]]:
    """Poll `name` until `until(status)` (default: a final state): each status read as `(status, None)`, then
    (with `logs`) each log line read with it as `(status, chunk)`; the last status is the one `until` took."""
    policy = policy or PollPolicy()
    cap = policy.follow_max_s if logs else policy.max_s
    delay = policy.initial_s
    last_state = ""
    cursor: object | None = None
    seen_running = False
    while True:
        status = backend.describe(name)
        if status.state != last_state:
            delay = policy.initial_s
            last_state = status.state
        yield status, None
        seen_running = seen_running or not status.done
        if logs:
            chunks: list[LogChunk] = []
            cursor = read_logs(backend, name, cursor, log_query, chunks.append)
            yield from ((status, chunk) for chunk in chunks)
        if until(status):
            if logs and status.done and seen_running and policy.final_logs_after_s > 0:
                sleep(policy.final_logs_after_s)
                chunks = []
                read_logs(backend, name, cursor, log_query, chunks.append)
                yield from ((status, chunk) for chunk in chunks)
            return
        sleep(delay)
        delay = min(cap, delay * policy.multiplier)


def watch(
    backend: Backend,
    name: str,
    *,
    on_status: Callable[[JobStatus], None],
    on_logs: Callable[[LogChunk, JobStatus], None] | None = None,
    log_query: LogQuery | None = None,
    policy: PollPolicy | None = None,
    until: Callable[[JobStatus], bool] = lambda status: status.done,
    sleep: Callable[[float], None] = time.sleep,
) -> JobStatus:
    """Poll `name` until `until(status)` (default: a final state), each status to `on_status` and (given
    `on_logs`) each log line to it; returns the last status seen."""
    events = polls(
        backend, name, logs=on_logs is not None, log_query=log_query, policy=policy, until=until, sleep=sleep
    )
    for status, chunk in events:
        if chunk is None:
            on_status(status)
        elif on_logs is not None:
            on_logs(chunk, status)
    return status  # the last one read: `polls` yields every status it reads


def read_logs(
    backend: Backend,
    name: str,
    cursor: object | None,
    query: LogQuery | None,
    on_chunk: Callable[[LogChunk], None],
) -> object | None:
    """Every log line ready now after `cursor`, page by page, to `on_chunk`; the cursor after them."""
    while True:
        page = backend.logs(name, cursor, query)
        for chunk in page.chunks:
            on_chunk(chunk)
        cursor = page.cursor
        if not page.more:
            return cursor


def log_policy(backend: object) -> PollPolicy:
    """How to follow `backend`'s logs: Cloud Logging's pace on Vertex; an emulator or a run folder, faster."""
    target = getattr(backend, "target", None)  # a Vertex backend's; a local one reads files
    if target is not None and not target.is_emulator:
        return CLOUD_LOGGING_POLICY
    return PollPolicy(follow_max_s=0.5)
