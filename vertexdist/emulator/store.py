"""The emulator's job store: Vertex resources as proto-JSON dicts, kept in memory and mirrored to disk.

One JSON file per resource under `<data_dir>/resources/<collection>/<id>.json`, written atomically, so a
restarted emulator shows the same jobs. The files hold what clients sent, secret env values included (a Get
returns them, as Vertex's does), so they are the user's alone: files 0600, folders 0700. A job that was not
finished when the emulator stopped cannot be resumed (its replica processes died with it), so loading marks
it FAILED and says why.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import secrets
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vertexdist.private_files import make_private_dir
from vertexdist.wire.enums import TERMINAL_JOB_STATES
from vertexdist.wire.proto_json import now_rfc3339

COLLECTIONS = (
    "customJobs",
    "trainingPipelines",
    "hyperparameterTuningJobs",
    "models",
    "operations",
    "persistentResources",
    "pipelineJobs",
)
# Collections whose resources have a state but are no jobs: a restart leaves them as they were.
_NOT_JOBS = ("persistentResources",)
TERMINAL_STATES = TERMINAL_JOB_STATES | {
    "PIPELINE_STATE_SUCCEEDED",
    "PIPELINE_STATE_FAILED",
    "PIPELINE_STATE_CANCELLED",
}
INTERRUPTED_MESSAGE = (
    "the emulator stopped while this job was {state}; its replicas did not survive the restart"
)
# google.rpc.Code.ABORTED: what Vertex reports for jobs lost to infrastructure restarts.
ABORTED = 10

Resource = dict[str, Any]


def is_terminal(resource: Resource) -> bool:
    return resource.get("state") in TERMINAL_STATES


def new_id() -> str:
    """A numeric id shaped like Vertex's (a 19-digit decimal)."""
    return str(10**18 + secrets.randbelow(9 * 10**18))


class JobStore:
    """Thread-safe resources by full name, with a condition to wait on changes (long-poll Gets)."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self._data_dir = Path(data_dir) if data_dir else None
        self._resources: dict[str, Resource] = {}
        self._changed = threading.Condition()
        if self._data_dir:
            self._load()

    # persistence
    def _path(self, name: str) -> Path:
        assert self._data_dir is not None
        collection, ident = name.split("/")[-2:]
        return self._data_dir / "resources" / collection / f"{ident}.json"

    def _persist(self, resource: Resource) -> None:
        if not self._data_dir:
            return
        path = self._path(resource["name"])
        if not path.parent.is_dir():
            make_private_dir(path.parent.parent)
            make_private_dir(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")  # created 0600
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(resource, handle, indent=1, sort_keys=True)
                # On disk before the rename: a machine crash must not leave an empty file under the real name.
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _load(self) -> None:
        assert self._data_dir is not None
        for collection in COLLECTIONS:
            folder = self._data_dir / "resources" / collection
            for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
                try:
                    resource = json.loads(path.read_text())
                except (OSError, ValueError):
                    continue  # a torn file from a crash mid-write is skipped, not fatal
                # jobs; models have no state, persistent resources outlive an emulator restart
                if collection not in _NOT_JOBS and "state" in resource and not is_terminal(resource):
                    self._mark_interrupted(resource)
                    self._persist(resource)
                self._resources[resource["name"]] = resource

    @staticmethod
    def _mark_interrupted(resource: Resource) -> None:
        state = str(resource.get("state", "")).split("_STATE_")[-1].lower()
        prefix = (
            "PIPELINE_STATE_"
            if re.search("/(trainingPipelines|pipelineJobs)/", resource["name"])
            else "JOB_STATE_"
        )
        stamp = now_rfc3339()
        resource["state"] = prefix + "FAILED"
        resource["error"] = {"code": ABORTED, "message": INTERRUPTED_MESSAGE.format(state=state)}
        resource["endTime"] = stamp
        resource["updateTime"] = stamp

    # access
    def insert(self, resource: Resource) -> Resource:
        with self._changed:
            self._resources[resource["name"]] = resource
            self._persist(resource)
            self._changed.notify_all()
            return copy.deepcopy(resource)

    def get(self, name: str) -> Resource | None:
        with self._changed:
            found = self._resources.get(name)
            return copy.deepcopy(found) if found is not None else None

    def update(self, name: str, change: Callable[[Resource], None], *, touch: bool = True) -> Resource:
        """Apply `change` to the stored resource under the lock, stamp updateTime, persist, notify waiters."""
        with self._changed:
            resource = self._resources[name]
            change(resource)
            if touch:
                resource["updateTime"] = now_rfc3339()
            self._persist(resource)
            self._changed.notify_all()
            return copy.deepcopy(resource)

    def delete(self, name: str) -> Resource | None:
        """Remove a resource (and its file); returns it as it was, or None if there was none."""
        with self._changed:
            found = self._resources.pop(name, None)
            if found is not None and self._data_dir:
                self._path(name).unlink(missing_ok=True)
            self._changed.notify_all()
            return found

    def names(self) -> list[str]:
        with self._changed:
            return list(self._resources)

    def list(self, parent: str, collection: str) -> list[Resource]:
        """Resources of one collection under `parent`, newest first (Vertex's default order)."""
        prefix = f"{parent}/{collection}/"
        with self._changed:
            found = [copy.deepcopy(r) for n, r in self._resources.items() if n.startswith(prefix)]
        return sorted(found, key=lambda r: (r.get("createTime", ""), r["name"]), reverse=True)

    def wait_until(self, name: str, done: Callable[[Resource], bool], timeout: float) -> Resource | None:
        """Block until `done(resource)` or timeout; returns the resource as it is then."""
        with self._changed:
            self._changed.wait_for(
                lambda: name not in self._resources or done(self._resources[name]), timeout
            )
            found = self._resources.get(name)
            return copy.deepcopy(found) if found is not None else None
