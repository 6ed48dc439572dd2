"""A managed job's attempts for the console (`Console.attempt_sources`), read from the managed jobs' store
(`vertexdist.managed.store`, the SQLite file `submit --managed` writes under `.vertexdist/managed/`).

Every attempt's job carries the label `vertexdist-managed: <managed id>-a<n>`; a job page of such a job shows
every attempt of its managed job, each linked to its own job's page, with the reason it ended.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from vertexdist.backends.base import JobStatus
from vertexdist.console.jobs import Attempt
from vertexdist.console.refs import JobRef, vertex_ref
from vertexdist.managed.attempts import MANAGED_LABEL


def managed_id_of(status: JobStatus) -> str | None:
    """The managed job a job is an attempt of (from its label `<id>-a<n>`), or None."""
    label = status.labels.get(MANAGED_LABEL, "")
    managed_id, sep, number = label.rpartition("-a")
    return managed_id if sep and managed_id and number.isdigit() else None


def _stamp(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat().replace("+00:00", "Z")


class ManagedAttempts:
    """The attempts of the managed job a job belongs to, from the store at `path` (None when it has none)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def attempts(self, ref: JobRef, status: JobStatus) -> list[Attempt] | None:
        from vertexdist.managed.store import Store, UnknownManagedJob

        managed_id = managed_id_of(status)
        if managed_id is None or not self.path.is_file():
            return None
        store = Store(self.path)
        try:
            store.get(managed_id)
            rows = store.attempts(managed_id)
        except UnknownManagedJob:
            return None
        finally:
            store.close()
        return [
            Attempt(
                number=row.number,
                state=row.state,
                start_time=_stamp(row.started),
                end_time=_stamp(row.ended),
                reason=row.reason,
                job=vertex_ref(row.job) if row.job else None,
            )
            for row in rows
        ]
