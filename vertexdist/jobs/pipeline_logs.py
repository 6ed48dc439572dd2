"""A PipelineJob's task logs through Cloud Logging alone, the same code on Vertex and on the emulator.

On Vertex every task of a pipeline runs as a CustomJob: its task detail names it in
`executorDetail.containerDetail.mainJob` (`projects/P/locations/L/customJobs/ID`), and what the task's
container prints is Cloud Logging entries of resource `ml_job` with `job_id` ID
(https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.pipelineJobs#pipelinetaskexecutordetail:
"the name of the CustomJob for the main container execution"; earlier attempts' in `failedMainJobs`, in
chronological order). A google-cloud-pipeline-components CustomJob step
(a `training_step`) starts one more CustomJob, the training itself, and names it in its `gcp_resources`
output parameter (`{"resources": [{"resourceType": "CustomJob", "resourceUri": "https://.../v1/projects/
.../customJobs/ID"}]}`, google-cloud-pipeline-components' `gcp_resources.proto`), which Vertex shows in the
task's `execution.metadata` as `output:gcp_resources`; a task detail may also name a job in
`executorDetail.customJobDetail.job`. The emulator fills the same fields and serves the same entries.

`task_jobs` (pure) finds each task's jobs in a PipelineJob's JSON; `PipelineLogs` reads their entries with
the Cloud Logging client `vertexdist logs` uses (`backends.vertex.cloud_logging`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vertexdist.backends.base import JobStatus, LogQuery
from vertexdist.backends.config import Target
from vertexdist.errors import UsageError

_CUSTOM_JOB = re.compile(r"projects/[^/]+/locations/[^/]+/customJobs/[^/?#]+")
_TASK_ENDED = ("SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED", "NOT_TRIGGERED")
MAIN_REPLICA = "workerpool0-0"


@dataclass(frozen=True)
class TaskJob:
    """One CustomJob whose entries are a task's lines."""

    task: str  # the task's name in the run
    job: str  # projects/P/locations/L/customJobs/ID
    create_time: str | None  # the task's; no entry of its job is older
    ended: bool  # the task ended: its job writes no more entries


def _gcp_resources_jobs(value: object) -> list[str]:
    """The CustomJobs a `gcp_resources` output names (pure; anything else in it is left out)."""
    if not isinstance(value, str):
        return []
    try:
        parsed = json.loads(value)
    except ValueError:
        return []
    found: list[str] = []
    for resource in parsed.get("resources", []) if isinstance(parsed, dict) else []:
        match = _CUSTOM_JOB.search(str(resource.get("resourceUri", "")))
        if match and resource.get("resourceType", "CustomJob") == "CustomJob":
            found.append(match.group(0))
    return found


def task_jobs(job: dict[str, Any]) -> list[TaskJob]:
    """Each task's CustomJobs in a PipelineJob (its REST JSON), in the order the tasks were made (pure):
    the task's own (`containerDetail`: failed attempts', then `mainJob`), then any it started
    (`customJobDetail.job`, and the CustomJobs its `gcp_resources` output names)."""
    found: list[TaskJob] = []
    for task in job.get("jobDetail", {}).get("taskDetails", []):
        executor = task.get("executorDetail", {})
        container = executor.get("containerDetail", {})
        names = [
            *container.get("failedMainJobs", []),
            container.get("mainJob", ""),
            executor.get("customJobDetail", {}).get("job", ""),
            *_gcp_resources_jobs(task.get("execution", {}).get("metadata", {}).get("output:gcp_resources")),
        ]
        ended = task.get("state", "") in _TASK_ENDED
        seen: set[str] = set()
        for name in names:
            if name and _CUSTOM_JOB.fullmatch(name) and name not in seen:
                seen.add(name)
                found.append(TaskJob(task.get("taskName", ""), name, task.get("createTime"), ended))
    return found


def prefixed(task: str, replica: str, text: str) -> list[str]:
    """An entry's lines, each prefixed by its task (and its replica, when not the first one) (pure)."""
    who = task if replica in (MAIN_REPLICA, "") else f"{task}/{replica}"
    return [f"{who}: {line}" for line in text.splitlines() or [""]]


class PipelineLogs:
    """The task logs of one PipelineJob: `get()` returns its REST JSON; entries come from Cloud Logging."""

    def __init__(self, target: Target, get: Callable[[], dict[str, Any]], *, source: Any = None) -> None:
        from vertexdist.backends.vertex.cloud_logging import CloudLoggingSource

        self.get = get
        self.source = source or CloudLoggingSource(target)
        self.poll_s = 0.5 if target.is_emulator else 5.0
        self._cursors: dict[str, object | None] = {}

    def _read(self, found: TaskJob, show: Callable[[str], None]) -> None:
        """Every entry of the job since the last read, shown."""

        def describe() -> JobStatus:
            return JobStatus(name=found.job, display_name=found.task, state="", create_time=found.create_time)

        while True:
            page = self.source.read(found.job, self._cursors.get(found.job), LogQuery(), describe)
            self._cursors[found.job] = page.cursor
            for chunk in page.chunks:
                for line in prefixed(found.task, chunk.replica, chunk.text):
                    show(line)
            if not page.more:
                return

    def show(self, show: Callable[[str], None], *, task: str | None = None, follow: bool = False) -> str:
        """Show the tasks' lines (one task's with `task`), task after task; with `follow`, as they come
        until the run ends. The run's state."""
        while True:
            job = self.get()
            state = str(job.get("state", ""))
            ended = state in ("PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED")
            jobs = task_jobs(job)
            if task is not None:
                names = sorted(
                    {t.get("taskName", "") for t in job.get("jobDetail", {}).get("taskDetails", [])}
                )
                if task not in names and (ended or not follow):
                    raise UsageError(
                        f"the run has no task {task!r}", hint=f"its tasks: {', '.join(names) or 'none yet'}"
                    )
                jobs = [j for j in jobs if j.task == task]
            for found in jobs:
                self._read(found, show)
            if not follow or ended:
                return state
            time.sleep(self.poll_s)
