"""The local backend: a Vertex CustomJob's replicas as local processes, with the environment Vertex sets.

`start_job(spec, ctx, ...)` runs a CustomJobSpec dict; `LocalJob` exposes state, cancel, wait and log files.
Light at import time: no torch, no Google Cloud libraries.
"""

from vertexdist.local.backend import install_packages, prepare_plan, start_job
from vertexdist.local.environment import JobContext
from vertexdist.local.job import JobSpec, JobSpecError, parse_job_spec
from vertexdist.local.plan import LaunchPlan, ReplicaLaunch, build_plan
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
    "JobSpec",
    "JobSpecError",
    "JobState",
    "LaunchPlan",
    "LocalJob",
    "ReplicaLaunch",
    "ReplicaState",
    "ReplicaStatus",
    "build_plan",
    "install_packages",
    "parse_job_spec",
    "prepare_plan",
    "start_job",
]
