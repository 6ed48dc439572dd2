"""`watch` and `read_logs` over a scripted backend (the Backend interface, nothing else): pages marked
`more` are read at once, the cursor goes back as it came, and the one late read for Cloud Logging's delay
happens only for a job that ended while it was followed."""

from __future__ import annotations

from typing import Any

from vertexdist.backends.base import JobStatus, LogChunk, LogQuery, LogsPage
from vertexdist.backends.watch import PollPolicy, polls, read_logs, watch


class Scripted:
    """States in turn, one per describe; log lines numbered by the cursor, `per_page` a page, `ready` now."""

    def __init__(self, states: list[str], ready: list[int], per_page: int = 2) -> None:
        self.states = states
        self.ready = ready  # how many lines exist at each describe
        self.per_page = per_page
        self.calls: list[tuple[object | None, LogQuery | None]] = []
        self._tick = -1

    def describe(self, name: str) -> JobStatus:
        self._tick = min(self._tick + 1, len(self.states) - 1)
        return JobStatus(name=name, display_name="d", state=self.states[self._tick])

    def logs(self, name: str, cursor: object | None = None, query: LogQuery | None = None) -> LogsPage:
        self.calls.append((cursor, query))
        start = cursor if isinstance(cursor, int) else 0
        end = min(start + self.per_page, self.ready[self._tick])
        chunks = [LogChunk("workerpool0-0", f"line {i}") for i in range(start, end)]
        return LogsPage(chunks=chunks, cursor=end, more=end < self.ready[self._tick])


def test_read_logs_reads_every_page_ready_now() -> None:
    backend = Scripted(["RUNNING"], ready=[5])
    backend.describe("j")
    got: list[LogChunk] = []
    cursor = read_logs(backend, "j", None, LogQuery(replica="workerpool0-0"), got.append)  # type: ignore[arg-type]
    assert [c.text for c in got] == [f"line {i}" for i in range(5)] and cursor == 5
    assert [c for c, _ in backend.calls] == [None, 2, 4]
    assert all(q == LogQuery(replica="workerpool0-0") for _, q in backend.calls)


def test_following_prints_each_line_once_and_reads_late_entries_after_the_end() -> None:
    backend = Scripted(["PENDING", "RUNNING", "RUNNING", "SUCCEEDED"], ready=[0, 3, 4, 6])
    seen: list[tuple[str, str]] = []
    sleeps: list[float] = []
    final = watch(
        backend,  # type: ignore[arg-type]
        "j",
        on_status=lambda s: None,
        on_logs=lambda chunk, status: seen.append((chunk.text, status.state)),
        policy=PollPolicy(initial_s=0.0, follow_max_s=0.0, final_logs_after_s=5.0),
        sleep=sleeps.append,
    )
    assert final.state == "SUCCEEDED"
    assert [text for text, _ in seen] == [f"line {i}" for i in range(6)]
    assert 5.0 in sleeps  # one more read once Cloud Logging has had time to show the last lines


def test_a_job_that_had_ended_already_is_read_once_without_waiting() -> None:
    backend = Scripted(["SUCCEEDED"], ready=[3])
    sleeps: list[float] = []
    seen: list[Any] = []
    watch(
        backend,  # type: ignore[arg-type]
        "j",
        on_status=lambda s: None,
        on_logs=lambda chunk, status: seen.append(chunk),
        policy=PollPolicy(final_logs_after_s=5.0),
        sleep=sleeps.append,
    )
    assert len(seen) == 3 and sleeps == []


def test_polls_yields_each_status_then_each_line_once_with_it_and_ends_on_the_last_status() -> None:
    backend = Scripted(["PENDING", "RUNNING", "RUNNING", "FAILED"], ready=[0, 3, 4, 6])
    sleeps: list[float] = []
    events = polls(
        backend,  # type: ignore[arg-type]
        "j",
        logs=True,
        policy=PollPolicy(initial_s=0.0, follow_max_s=0.0, final_logs_after_s=5.0),
        sleep=sleeps.append,
    )
    seen: list[tuple[str, str]] = []
    for final, chunk in events:
        if chunk is not None:
            seen.append((chunk.text, final.state))
    assert final.state == "FAILED"
    assert [text for text, _ in seen] == [f"line {i}" for i in range(6)]
    assert seen[0][1] == "RUNNING" and 5.0 in sleeps


class Clocked:
    """A job that ends `end_at` s after the first describe, on a clock that only `sleep` moves."""

    def __init__(self, end_at: float) -> None:
        self.end_at, self.now = end_at, 0.0

    def describe(self, name: str) -> JobStatus:
        state = "SUCCEEDED" if self.now >= self.end_at else "RUNNING"
        return JobStatus(name=name, display_name="d", state=state)

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_submit_follow_learns_of_an_emulator_jobs_end_within_a_quarter_second() -> None:
    """The poll that notices the end was most of what `submit --follow` added to a short emulator job: it
    comes at most 0.25 s after the end, whenever the job ends; Vertex keeps backing off to 10 s."""
    from vertexdist.backends.watch import follow_policy

    for tenth in range(1, 600):
        backend = Clocked(tenth / 10)
        policy = follow_policy(True, logs=False)
        final = watch(backend, "j", on_status=lambda s: None, policy=policy, sleep=backend.sleep)  # type: ignore[arg-type]
        assert final.state == "SUCCEEDED"
        assert backend.now - backend.end_at <= 0.25 + 1e-9, (backend.end_at, backend.now)
    assert follow_policy(True, logs=True).follow_max_s <= 0.25
    assert follow_policy(False, logs=False).max_s == 10.0
    assert follow_policy(False, logs=True).follow_max_s == 5.0
