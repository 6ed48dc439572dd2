"""The emulator's jobs' replica logs as Cloud Logging entries, shaped as Vertex writes them.

An entry per log line (`local.log_records`: stdout INFO, stderr ERROR, the time its write arrived), with
the `ml_job` resource (`job_id`, `task_name`, `project_id`), Vertex's labels and `jsonPayload.message`, as in
a real entry (GoogleCloudPlatform/cortex-data-foundation#42; `logName` is `projects/P/logs/<replica>`
there too). A tuning job's entries are its trials' CustomJobs' lines with the tuning job's id and each
trial's id in `labels."ml.googleapis.com/trial_id"` (a trial's own CustomJob id reads them too). A pipeline
task's output is the entries of the CustomJob id its task detail names (`containerDetail.mainJob`).

Entries are ordered by (timestamp, insertId): within a replica times strictly increase, so the order is the
replicas' lines merged by time. Readers are kept per log file and read only what was appended.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertexdist.emulator.logging.filter import EntryFilter
from vertexdist.emulator.store import is_terminal
from vertexdist.emulator.vertex.jobs import EmulatorService
from vertexdist.local.log_records import LogLine, LogReader
from vertexdist.wire.timestamps import format_ns

TRIAL_LABEL = "ml.googleapis.com/trial_id"
_JOB_COLLECTIONS = ("customJobs", "hyperparameterTuningJobs")
_TASK_ENDED = ("SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED", "NOT_TRIGGERED")

SortKey = tuple[int, str]  # (timestamp ns, insertId)


@dataclass(frozen=True)
class ReplicaLog:
    """One replica's log as a source of entries of one job."""

    project: str
    job_id: str  # the id entries carry (a tuning job's, for its trials)
    replica: str
    trial: str  # "" outside tuning jobs
    path: Path
    final: bool  # the job ended: an unterminated last line is a line


@dataclass(frozen=True)
class Entry:
    key: SortKey
    source: ReplicaLog
    line: LogLine

    def to_json(self) -> dict[str, Any]:
        severity = self.line.severity
        stamp = format_ns(self.line.time_ns)
        source = self.source
        return {
            "logName": f"projects/{source.project}/logs/{source.replica}",
            "resource": {
                "type": "ml_job",
                "labels": {
                    "job_id": source.job_id,
                    "task_name": source.replica,
                    "project_id": source.project,
                },
            },
            "timestamp": stamp,
            "receiveTimestamp": stamp,
            "severity": severity,
            "insertId": self.key[1],
            "labels": {
                TRIAL_LABEL: source.trial,
                "ml.googleapis.com/trial_type": "",
                "ml.googleapis.com/tpu_worker_id": "",
                "ml.googleapis.com/job_id/log_area": "root",
            },
            "jsonPayload": {"message": self.line.text, "levelname": severity},
        }


def insert_id(source: ReplicaLog, line: LogLine) -> str:
    return "-".join(part for part in (source.trial, source.replica, f"{line.offset:012d}") if part)


class JobEntries:
    """Entries of the emulator's jobs, read from their replicas' log files."""

    def __init__(self, service: EmulatorService) -> None:
        self._service = service
        self._readers: dict[Path, LogReader] = {}
        self._lock = threading.Lock()

    def replica_logs(self, project: str, job_id: str) -> list[ReplicaLog]:
        """The log files whose lines are entries of job `job_id` (a CustomJob's, or a tuning job's trials)."""
        resource = self._find(project, job_id)
        if resource is None:
            return self._of_pipeline_task(project, job_id)
        if "/customJobs/" in resource["name"]:
            return self._of_custom_job(project, job_id, resource["name"], trial="")
        logs = []
        for trial in resource.get("trials") or []:
            job = trial.get("customJob") if isinstance(trial, dict) else None
            if isinstance(job, str) and self._service.store.get(job) is not None:
                logs += self._of_custom_job(project, job_id, job, trial=str(trial.get("id", "")))
        return logs

    def entries(self, logs: list[ReplicaLog], where: EntryFilter, after: SortKey | None) -> Iterator[Entry]:
        """The entries of `logs` that `where` keeps, in (timestamp, insertId) order, after `after`."""
        floor = max(where.time_floor() or 0, after[0] if after else 0)
        streams = []
        for source in logs:
            if not all(self._label(source, k) == v for k, v in where.resource_labels.items()):
                continue
            if where.trial is not None and source.trial != where.trial:
                continue
            lines = self._lines(source)
            start = bisect.bisect_left(lines, floor, key=lambda line: line.time_ns)
            streams.append(self._from(source, lines, start))
        for entry in heapq.merge(*streams, key=lambda entry: entry.key):
            if after is not None and entry.key <= after:
                continue
            if where.keeps(entry.key, entry.line.severity):
                yield entry

    @staticmethod
    def _from(source: ReplicaLog, lines: list[LogLine], start: int) -> Iterator[Entry]:
        for line in itertools.islice(lines, start, None):
            yield Entry((line.time_ns, insert_id(source, line)), source, line)

    def _lines(self, source: ReplicaLog) -> list[LogLine]:
        """The replica's lines so far; the list only grows at its end (another request may read on)."""
        with self._lock:  # handler threads share the readers
            reader = self._readers.get(source.path)
            if reader is None:
                reader = self._readers[source.path] = LogReader(source.path)
            return reader.lines(final=source.final)

    @staticmethod
    def _label(source: ReplicaLog, key: str) -> str:
        return {"job_id": source.job_id, "task_name": source.replica, "project_id": source.project}[key]

    def _find(self, project: str, job_id: str) -> dict[str, Any] | None:
        prefix = f"projects/{project}/locations/"
        for name in self._service.store.names():
            collection, ident = name.rsplit("/", 2)[-2:]
            if ident == job_id and collection in _JOB_COLLECTIONS and name.startswith(prefix):
                return self._service.store.get(name)
        return None

    def _of_pipeline_task(self, project: str, job_id: str) -> list[ReplicaLog]:
        """A pipeline task's output: on Vertex the task runs as CustomJob `job_id` (its task detail's
        `executorDetail.containerDetail.mainJob`), one replica, `workerpool0-0`."""
        prefix = f"projects/{project}/locations/"
        for name in self._service.store.names():
            if "/pipelineJobs/" not in name or not name.startswith(prefix):
                continue
            job = self._service.store.get(name) or {}
            task = (job.get("_taskLogs") or {}).get(job_id)
            if task is None:
                continue
            details = job.get("jobDetail", {}).get("taskDetails", [])
            state = next((d.get("state") for d in details if d.get("taskId") == task["taskId"]), "")
            final = state in _TASK_ENDED or is_terminal(job)
            return [ReplicaLog(project, job_id, "workerpool0-0", "", Path(task["log"]), final)]
        return []

    def _of_custom_job(self, project: str, job_id: str, job_name: str, *, trial: str) -> list[ReplicaLog]:
        job = self._service.store.get(job_name) or {}
        final = is_terminal(job)
        files = self._service.log_files(job_name)
        return [
            ReplicaLog(project, job_id, replica, trial, path, final)
            for replica, path in sorted(files.items())
        ]
