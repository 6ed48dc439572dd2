"""A managed job's attempts for the console (`Console.attempt_sources`), read from the managed jobs' store
(`vertexdist.managed.store`, the SQLite file `submit --managed` writes under `.vertexdist/managed/`).

Every attempt's job carries the label `vertexdist-managed: <managed id>-a<n>`; a job page of such a job shows
every attempt of its managed job, each linked to its own job's page, with the reason it ended.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from vertexdist.backends.base import JobStatus
from vertexdist.console.attempts import Attempt
from vertexdist.console.metrics import Window
from vertexdist.console.refs import JobRef, vertex_ref
from vertexdist.managed.attempts import MANAGED_LABEL

LOCAL_MARKER = "managed.json"  # jobs.local_attempts.MARKER: the attempt's label, in its run folder


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

        if not self.path.is_file():
            return None
        store = Store(self.path)
        try:
            # A Vertex attempt says whose it is in its label; a local run's id is looked up.
            managed_id = managed_id_of(status) or store.managed_of_job(
                ref.job if ref.source == "local" else status.name
            )
            if managed_id is None or ref.trial is not None:
                return None
            local = store.get(managed_id).backend == "local"
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
                job=(JobRef("local", row.job) if local else vertex_ref(row.job)) if row.job else None,
            )
            for row in rows
        ]


def is_local_attempt(run_dir: Path) -> bool:
    """Whether a local run is an attempt of a managed job (`local-run` of a template with `recovery:`)."""
    return (run_dir / LOCAL_MARKER).is_file()


def attempt_windows(attempts: list[Attempt], ref: JobRef) -> list[Window] | None:
    """The windows of the attempts up to `ref`'s own (None when `ref` is not one of them): its page's charts
    show each attempt's scalars in its own colour, none past `ref`'s attempt's end."""
    numbers = [a.number for a in attempts if a.job == ref]
    if not numbers:
        return None
    windows: list[Window] = []
    for a in attempts:
        if a.number > numbers[0]:
            break
        start = None if not windows else _seconds(a.start_time)
        windows.append(Window(f"attempt {a.number}", start, _seconds(a.end_time)))
    return windows


def _seconds(stamp: str | None) -> float | None:
    if stamp is None:
        return None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
