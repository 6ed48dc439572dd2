"""What `vertexdist logs` asks Cloud Logging for on Vertex, and how it reads an entry back (pure).

Vertex writes a training job's replica output as entries of the `ml_job` monitored resource with
`resource.labels` `job_id` (the CustomJob's numeric id), `task_name` (the replica, `workerpool0-0`) and
`project_id`; stdout lines at INFO, stderr lines at ERROR; the text in `jsonPayload.message` or `textPayload`;
`labels."ml.googleapis.com/trial_id"` names a tuning job's trial (empty otherwise). A TrainingPipeline has no
entries of its own: its backing CustomJob has them. A tuning job's entries carry its own id in `job_id` and
each trial in the trial label, so one read has every trial, prefixed `trial-ID/`.
Where this comes from: gcloud's `ai custom-jobs stream-logs` and `ai hp-tuning-jobs stream-logs`
(googlecloudsdk/command_lib/ai/log_util.py: `resource.type="ml_job" AND resource.labels.job_id="ID"`, a task
as `resource.labels.task_name="T"`, the task read from `resource.labels.task_name`), gcloud's ml_engine
log_utils (the trial from `labels.trial_id` or `labels."ml.googleapis.com/trial_id"`, the task from the
older `labels.task_name` / `labels."ml.googleapis.com/task_name"`, the text from `jsonPayload.message` or
`textPayload`), a real entry in GoogleCloudPlatform/cortex-data-foundation#42, and stderr at ERROR in
GoogleCloudPlatform/vertex-ai-samples#242.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from vertexdist.backends.base import LogQuery, severity_rank
from vertexdist.wire.timestamps import format_ns

ML_JOB = "ml_job"
TRIAL_LABEL = "ml.googleapis.com/trial_id"
TASK_LABEL = "ml.googleapis.com/task_name"
UNKNOWN_TASK = "unknown_task"  # what gcloud shows for an entry without one


def quoted(value: str) -> str:
    """A string literal of the Logging query language (double quotes, backslash escapes)."""
    return json.dumps(value)


def entries_filter(job_id: str, query: LogQuery, floor_ns: int) -> str:
    """The filter for one job's entries that `query` keeps, none older than `floor_ns`.

    A timestamp term is always there: without one the client library adds "the last 24 hours" itself.
    """
    terms = [f"resource.type={quoted(ML_JOB)}", f"resource.labels.job_id={quoted(job_id)}"]
    if query.replica:
        terms.append(f"resource.labels.task_name={quoted(query.replica)}")
    if query.trial:
        terms.append(f"labels.{quoted(TRIAL_LABEL)}={quoted(query.trial)}")
    if query.severity:
        terms.append(f"severity>={query.severity.upper()}")
    if query.since is not None:
        floor_ns = max(floor_ns, int(query.since * 1e9))
    terms.append(f"timestamp>={quoted(format_ns(floor_ns))}")
    return " AND ".join(terms)


def check_severity(name: str) -> str:
    severity_rank(name)  # ValueError for a name Cloud Logging does not know
    return name.upper()


def task_of(resource_labels: Mapping[str, str], labels: Mapping[str, str]) -> str:
    return (
        resource_labels.get("task_name") or labels.get("task_name") or labels.get(TASK_LABEL) or UNKNOWN_TASK
    )


def trial_of(labels: Mapping[str, str]) -> str | None:
    return labels.get("trial_id") or labels.get(TRIAL_LABEL) or None


def replica_label(resource_labels: Mapping[str, str], labels: Mapping[str, str]) -> str:
    """The prefix a line is shown with: `workerpool0-0`, or `trial-3/workerpool0-0` in a tuning job."""
    task = task_of(resource_labels, labels)
    trial = trial_of(labels)
    return f"trial-{trial}/{task}" if trial else task


def message_of(payload: Any) -> str:
    """An entry's text: `textPayload`, or `jsonPayload.message` (the rest of a JSON payload as JSON)."""
    if payload is None:
        return ""
    if isinstance(payload, str):
        return payload
    if isinstance(payload, Mapping):
        message = payload.get("message")
        if isinstance(message, str):
            return message
    return json.dumps(payload, default=str, sort_keys=True)
