"""A Vertex resource (TrainingPipeline or CustomJob, as the client returns it) as the backend's `JobStatus`.

The spec is read back through the one wire reader (`vertexdist.wire`): the SDK writes a pipeline's
`trainingTaskInputs` with snake_case keys and floats for ints.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from vertexdist.backends.base import JobStatus, ReplicaInfo, StateChange
from vertexdist.backends.config import Target, parse_job_name
from vertexdist.render import mask_secrets, mask_text, secret_values
from vertexdist.wire.proto_json import normalize_job_spec

__all__ = ["console_url", "epoch", "mask_text", "replicas_of", "status_of", "timeline_of"]


def _short_state(state: str) -> str:
    return state.removeprefix("PIPELINE_STATE_").removeprefix("JOB_STATE_")


def _camel_spec(inputs: Any) -> dict[str, Any]:
    if not isinstance(inputs, dict):
        return {}
    try:
        return normalize_job_spec(inputs)
    except ValueError:
        return inputs


def epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def console_url(name: str, target: Target) -> str | None:
    parts = parse_job_name(name)
    if target.is_emulator or not parts:
        return None
    kind = {
        "trainingPipelines": "training",
        "customJobs": "training/custom-jobs",
        "hyperparameterTuningJobs": "training/hyperparameter-tuning-jobs",
    }[parts["collection"]]
    return (
        f"https://console.cloud.google.com/vertex-ai/locations/{parts['location']}/{kind}/"
        f"{parts['id']}?project={parts['project']}"
    )


def status_of(resource: Any, target: Target) -> JobStatus:
    from google.protobuf import json_format

    data: dict[str, Any] = json_format.MessageToDict(type(resource).pb(resource))
    name = str(data.get("name", ""))
    if "trainingTaskInputs" in data:
        spec = _camel_spec(data["trainingTaskInputs"])
    else:
        spec = data.get("jobSpec") or data.get("trialJobSpec") or {}
    error = data.get("error") or {}
    secrets = secret_values(spec)
    # Vertex (and the emulator) put the failing replica's last log lines in the message.
    message = mask_text(str(error["message"]), secrets) if error.get("message") else None
    return JobStatus(
        name=name,
        display_name=str(data.get("displayName", "")),
        state=_short_state(str(data.get("state", "STATE_UNSPECIFIED"))),
        create_time=data.get("createTime"),
        start_time=data.get("startTime"),
        end_time=data.get("endTime"),
        error=message,
        backing_job=(data.get("trainingTaskMetadata") or {}).get("backingCustomJob"),
        labels=dict(data.get("labels") or {}),
        console_url=console_url(name, target),
        spec=mask_secrets(spec),
        location=(parse_job_name(name) or {}).get("location") or target.location,
        secret_values=secrets,
    )


# Replicas listed per pool at most: a job that asks for millions (Vertex refuses it, an old emulator
# folder may hold one) must not hang the console's job page building their rows.
MAX_LISTED_REPLICAS = 1000


def replicas_of(status: JobStatus) -> list[ReplicaInfo]:
    """The job's replicas from its spec (the first MAX_LISTED_REPLICAS of each pool): Vertex reports no state
    or exit code per replica, so each shows the job's state and no exit code."""
    pools = status.spec.get("workerPoolSpecs")
    found: list[ReplicaInfo] = []
    for index, pool in enumerate(pools if isinstance(pools, list) else []):
        if not isinstance(pool, dict):
            continue
        machine = str((pool.get("machineSpec") or {}).get("machineType") or "")
        try:
            count = min(int(pool.get("replicaCount") or 0), MAX_LISTED_REPLICAS)
        except (TypeError, ValueError):
            count = 0
        found += [ReplicaInfo(f"workerpool{index}-{n}", index, machine, status.state) for n in range(count)]
    return found


def timeline_of(status: JobStatus) -> list[StateChange]:
    """What Vertex tells of a job's course: created, started, ended (with its error)."""
    steps = []
    if status.create_time:
        steps.append(StateChange(status.create_time, "QUEUED"))
    if status.start_time:
        steps.append(StateChange(status.start_time, "RUNNING"))
    if status.end_time:
        steps.append(StateChange(status.end_time, status.state, message=status.error or ""))
    elif status.state not in ("QUEUED", "PENDING", "RUNNING") and steps:
        steps.append(StateChange(steps[-1].time, status.state, message=status.error or ""))
    return steps
