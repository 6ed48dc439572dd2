"""The local runtime: a Vertex CustomJob's replicas as local processes (or containers), each with the
environment Vertex sets. The local backend (`vertexdist.backends.local`) puts it behind the Backend
interface, and the emulator runs its jobs on it (`vertexdist.emulator.local_runner`).

`start_job(spec, ctx, ...)` runs a CustomJobSpec dict (the emulator's way in); `LocalJob` exposes state,
cancel, wait and log files. Light at import time: no torch, no Google Cloud libraries.
"""

from vertexdist.local.environment import JobContext
from vertexdist.local.launch import schedule, start_job
from vertexdist.local.plan import LaunchPlan, ReplicaLaunch, build_plan
from vertexdist.local.request import LocalRequest, build_request
from vertexdist.local.runner import (
    JobError,
    JobEvent,
    JobResult,
    JobState,
    LocalJob,
    ReplicaState,
    ReplicaStatus,
)

__all__ = [
    "JobContext",
    "JobError",
    "JobEvent",
    "JobResult",
    "JobState",
    "LaunchPlan",
    "LocalJob",
    "LocalRequest",
    "ReplicaLaunch",
    "ReplicaState",
    "ReplicaStatus",
    "build_plan",
    "build_request",
    "schedule",
    "start_job",
]
