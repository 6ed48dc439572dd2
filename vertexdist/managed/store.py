"""The durable state of managed jobs: one SQLite file under `.vertexdist/`.

Each transition is written (and committed) before the controller acts on it, so a controller killed at any
moment is continued by `vertexdist managed resume ID` from the last written step:
- an attempt row is written in phase `creating`, with its label, before its job is created; on resume the
  controller first looks for a job with that label (the create may have reached the backend), and creates
  one only when there is none;
- phase `created` records the job's name and output folder; `ended` its final state and reason.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from vertexdist.errors import UsageError

STORE_PATH = Path(".vertexdist/managed.sqlite")

CREATING, CREATED, ENDED = "creating", "created", "ended"
RUNNING, SUCCEEDED, FAILED, CANCELLED = "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS managed (
    id TEXT PRIMARY KEY,
    template TEXT NOT NULL,
    backend TEXT NOT NULL,
    target TEXT NOT NULL,
    state TEXT NOT NULL,
    why TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS attempts (
    managed_id TEXT NOT NULL REFERENCES managed(id),
    number INTEGER NOT NULL,
    place INTEGER NOT NULL,
    label TEXT NOT NULL,
    phase TEXT NOT NULL,
    job TEXT,
    output_dir TEXT,
    location TEXT,
    machine_type TEXT,
    scheduling_strategy TEXT,
    state TEXT NOT NULL DEFAULT 'PENDING',
    reason TEXT NOT NULL DEFAULT 'RUNNING',
    error TEXT,
    started REAL,
    ended REAL,
    PRIMARY KEY (managed_id, number)
);
"""


def new_managed_id(now: float | None = None) -> str:
    """`m-YYYYMMDD-HHMMSS-xxxx`: sortable, and valid inside a Vertex label value."""
    stamp = datetime.fromtimestamp(now or time.time(), timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"m-{stamp}-{secrets.token_hex(2)}"


def _iso(value: float | None) -> str | None:
    if value is None:
        return None
    return datetime.fromtimestamp(value, timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Attempt:
    managed_id: str
    number: int
    place: int
    label: str
    phase: str
    job: str | None
    output_dir: str | None
    location: str | None
    machine_type: str | None
    scheduling_strategy: str | None
    state: str
    reason: str
    error: str | None
    started: float | None
    ended: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "location": self.location,
            "machine_type": self.machine_type,
            "scheduling_strategy": self.scheduling_strategy,
            "state": self.state,
            "reason": self.reason,
            "started": _iso(self.started),
            "ended": _iso(self.ended),
        }


@dataclass(frozen=True)
class Managed:
    id: str
    template: str
    backend: str
    target: dict[str, Any]
    state: str
    why: str
    created: float

    @property
    def done(self) -> bool:
        return self.state != RUNNING


class UnknownManagedJob(UsageError):
    pass


class Store:
    """The managed jobs of one folder (`path`, made on first use)."""

    def __init__(self, path: Path = STORE_PATH) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=30.0, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def create(
        self, template: str, backend: str, target: dict[str, Any], managed_id: str | None = None
    ) -> Managed:
        managed_id = managed_id or new_managed_id()
        with self._write() as db:
            db.execute(
                "INSERT INTO managed (id, template, backend, target, state, created)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (managed_id, template, backend, json.dumps(target), RUNNING, time.time()),
            )
        return self.get(managed_id)

    def get(self, managed_id: str) -> Managed:
        row = self._db.execute("SELECT * FROM managed WHERE id = ?", (managed_id,)).fetchone()
        if row is None:
            raise UnknownManagedJob(
                f"no managed job {managed_id!r} in {self.path}",
                hint="`vertexdist managed list` shows them; run it where `submit --managed` ran",
            )
        return Managed(
            row["id"],
            row["template"],
            row["backend"],
            json.loads(row["target"]),
            row["state"],
            row["why"],
            row["created"],
        )

    def all(self) -> list[Managed]:
        ids = [r["id"] for r in self._db.execute("SELECT id FROM managed ORDER BY created DESC")]
        return [self.get(i) for i in ids]

    def managed_of_job(self, job: str) -> str | None:
        """The managed job one of whose attempts ran as `job` (a job's resource name, a local run's id)."""
        row = self._db.execute("SELECT managed_id FROM attempts WHERE job = ? LIMIT 1", (job,)).fetchone()
        return str(row["managed_id"]) if row is not None else None

    def finish(self, managed_id: str, state: str, why: str) -> None:
        with self._write() as db:
            db.execute("UPDATE managed SET state = ?, why = ? WHERE id = ?", (state, why, managed_id))

    def attempts(self, managed_id: str) -> list[Attempt]:
        rows = self._db.execute(
            "SELECT * FROM attempts WHERE managed_id = ? ORDER BY number", (managed_id,)
        ).fetchall()
        return [Attempt(**dict(row)) for row in rows]

    def plan_attempt(
        self,
        managed_id: str,
        place: int,
        location: str | None,
        machine_type: str | None,
        strategy: str | None,
    ) -> Attempt:
        """Write the next attempt (phase `creating`) before its job is created."""
        with self._write() as db:
            number = db.execute(
                "SELECT COALESCE(MAX(number), 0) + 1 FROM attempts WHERE managed_id = ?", (managed_id,)
            ).fetchone()[0]
            db.execute(
                "INSERT INTO attempts (managed_id, number, place, label, phase, location, machine_type, "
                "scheduling_strategy, started) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    managed_id,
                    number,
                    place,
                    f"{managed_id}-a{number}",
                    CREATING,
                    location,
                    machine_type,
                    strategy,
                    time.time(),
                ),
            )
        return self.attempts(managed_id)[number - 1]

    def created(self, attempt: Attempt, job: str, output_dir: str | None) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE attempts SET phase = ?, job = ?, output_dir = ? WHERE managed_id = ? AND number = ?",
                (CREATED, job, output_dir, attempt.managed_id, attempt.number),
            )

    def job_state(self, attempt: Attempt, state: str) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE attempts SET state = ? WHERE managed_id = ? AND number = ?",
                (state, attempt.managed_id, attempt.number),
            )

    def ended(self, attempt: Attempt, state: str, reason: str, error: str | None) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE attempts SET phase = ?, state = ?, reason = ?, error = ?, ended = ? "
                "WHERE managed_id = ? AND number = ?",
                (ENDED, state, reason, error, time.time(), attempt.managed_id, attempt.number),
            )

    def status(self, managed_id: str) -> dict[str, Any]:
        """The shape of `vertexdist managed status ID --json`."""
        managed = self.get(managed_id)
        return {
            "id": managed.id,
            "state": managed.state,
            "template": managed.template,
            "attempts": [a.to_dict() for a in self.attempts(managed_id)],
        }
