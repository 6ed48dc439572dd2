"""Which machines of a persistent resource the emulator's jobs hold (Vertex's `usedReplicaCount`).

A job on a persistent resource takes its replicas when it leaves QUEUED and holds them until it ends; one
that fits the resource's shape but not its free machines waits QUEUED (Vertex is silent on the state; a
job waiting for machines is QUEUED by the JobState docs' "the job has been just created or resumed and
processing has not yet begun"). Usage is counted from the store each time (the jobs holding machines are
marked), so a job that ends, however it ends, gives its machines back.
"""

from __future__ import annotations

import threading
from typing import Any, Literal

from vertexdist.emulator.store import JobStore, is_terminal
from vertexdist.wire.placement import Shape, fits_free, replicas_asked

# A job holding machines of a persistent resource: the resource's name.
HOLDS_KEY = "_holds"
JOBS = "customJobs"
Taken = Literal["taken", "busy", "gone"]


class ReplicaLedger:
    def __init__(self, store: JobStore) -> None:
        self._store = store
        self._lock = threading.Lock()

    def in_use(self, resource_name: str) -> dict[Shape, int]:
        """The machines by shape that unfinished jobs hold on the resource."""
        parent = resource_name.split("/persistentResources/", 1)[0]
        used: dict[Shape, int] = {}
        for job in self._store.list(parent, JOBS):
            if job.get(HOLDS_KEY) == resource_name and not is_terminal(job):
                for shape, count in replicas_asked(job.get("jobSpec") or {}).items():
                    used[shape] = used.get(shape, 0) + count
        return used

    def take(self, job_name: str, resource_name: str, spec: dict[str, Any]) -> Taken:
        """Give the job its machines if they are free ("taken"); "busy" if not yet, "gone" when the
        resource no longer exists."""
        with self._lock:
            resource = self._store.get(resource_name)
            if resource is None:
                return "gone"
            if not fits_free(spec, resource, self.in_use(resource_name)):
                return "busy"
            self._store.update(job_name, lambda job: job.update({HOLDS_KEY: resource_name}), touch=False)
            return "taken"
