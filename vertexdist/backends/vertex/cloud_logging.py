"""A job's replica logs from Cloud Logging through google-cloud-logging's HTTP client (imported on first use).

The same client reads Vertex's Cloud Logging and the emulator's (its `POST /v2/entries:list`), so the tests
run this very code. One page (up to `page_size` entries) per `read`; the cursor keeps the query being paged
and a `TailCursor` (`backends.log_cursor`), so following a job returns every entry once. The filter and the
way an entry reads are in `log_filter`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from vertexdist.backends.base import JobStatus, LogChunk, LogQuery, LogsPage
from vertexdist.backends.config import Target
from vertexdist.backends.log_cursor import OVERLAP_NS, TailCursor
from vertexdist.backends.vertex.clients import credentials_for
from vertexdist.backends.vertex.log_filter import entries_filter, message_of, replica_label
from vertexdist.wire.timestamps import datetime_ns, format_ns, parse_ns

PAGE_SIZE = 1000  # Cloud Logging's largest page
# A job's entries cannot be older than the job; the slack covers clocks that disagree a little.
CLOCK_SLACK_NS = 60 * 1_000_000_000


@dataclass(frozen=True)
class LoggedJob:
    """The job whose entries carry a name's logs: its id (`resource.labels.job_id`), project, oldest time."""

    job_id: str
    project: str
    floor_ns: int


@dataclass
class _Reading:
    """One query being paged: the client's entry iterator (it fetches the next page when it needs it)."""

    entries: Iterator[Any]
    broken: bool = False  # a page failed: the iterator is dead, the next read asks again from the cursor


@dataclass(frozen=True)
class CloudLogCursor:
    job: LoggedJob | None = None
    tail: TailCursor = field(default_factory=TailCursor)
    reading: _Reading | None = None


def logged_job(name: str, describe: Callable[[], JobStatus]) -> LoggedJob | None:
    """Which job's entries `name`'s logs are; None while a pipeline has no CustomJob yet."""
    status = describe()
    job = name
    if "/trainingPipelines/" in name:
        if not status.backing_job:
            return None
        job = status.backing_job
    project = name.removeprefix("projects/").split("/", 1)[0]
    created = parse_ns(status.create_time) if status.create_time else 0
    return LoggedJob(job.rsplit("/", 1)[-1], project, max(0, created - CLOCK_SLACK_NS))


class CloudLoggingSource:
    """A `LogSource` over Cloud Logging (or the emulator's Logging API when the target is an emulator)."""

    def __init__(
        self,
        target: Target,
        *,
        client: Any = None,
        page_size: int = PAGE_SIZE,
        overlap_ns: int = OVERLAP_NS,
    ) -> None:
        self.target = target
        self._client = client
        self._page_size = page_size
        self._overlap_ns = overlap_ns

    @property
    def client(self) -> Any:
        if self._client is None:
            from google.cloud.logging_v2.client import Client

            options = {"api_endpoint": self.target.api_endpoint} if self.target.is_emulator else None
            # The HTTP transport everywhere: one code path, and the one the emulator serves.
            self._client = Client(
                project=self.target.project or None,
                credentials=credentials_for(self.target),
                _use_grpc=False,
                client_options=options,
            )
        return self._client

    def read(
        self, name: str, cursor: object | None, query: LogQuery, describe: Callable[[], JobStatus]
    ) -> LogsPage:
        state = cursor if isinstance(cursor, CloudLogCursor) else CloudLogCursor(tail=self._new_tail())
        job = state.job or logged_job(name, describe)
        if job is None:
            return LogsPage(chunks=[], cursor=state)
        reading = state.reading
        if reading is None or reading.broken:
            reading = self._query(job, state.tail, query)
        entries: list[Any] = []
        try:
            entries.extend(itertools.islice(reading.entries, self._page_size))
        except Exception:
            reading.broken = True  # nothing of this page was returned: the retry reads it again
            raise
        done = len(entries) < self._page_size
        keys = [(datetime_ns(e.timestamp) if e.timestamp else 0, e.insert_id or "") for e in entries]
        fresh, tail = state.tail.advance(keys)
        chunks = [self._chunk(entries[i], keys[i][0]) for i in fresh]
        return LogsPage(
            chunks=chunks,
            cursor=CloudLogCursor(job=job, tail=tail, reading=None if done else reading),
            more=not done,
        )

    def _new_tail(self) -> TailCursor:
        return TailCursor(overlap_ns=self._overlap_ns)

    def _query(self, job: LoggedJob, tail: TailCursor, query: LogQuery) -> _Reading:
        from google.cloud.logging_v2 import ASCENDING

        floor = max(job.floor_ns, tail.floor_ns or 0)
        entries = self.client.list_entries(
            resource_names=[f"projects/{job.project}"],
            filter_=entries_filter(job.job_id, query, floor),
            order_by=ASCENDING,
            page_size=self._page_size,
        )
        return _Reading(iter(entries))

    @staticmethod
    def _chunk(entry: Any, time_ns: int) -> LogChunk:
        resource_labels = dict(getattr(entry.resource, "labels", None) or {})
        return LogChunk(
            replica=replica_label(resource_labels, dict(entry.labels or {})),
            text=message_of(entry.payload),
            severity=str(entry.severity or "DEFAULT"),
            timestamp=format_ns(time_ns) if time_ns else None,
            payload=entry.payload if isinstance(entry.payload, Mapping) else None,
        )
