"""Where the Vertex backend reads a job's replica logs: a `LogSource` it is given.

On Vertex the logs live in Cloud Logging; `ConsoleLogLinks` answers with the Logs Explorer query for the
job (`resource.type="ml_job"`, reference/vertex.md §1.5). The emulator passes its own source
(`vertexdist.emulator.log_client`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol
from urllib.parse import quote

from vertexdist.backends.base import JobStatus, LogsPage
from vertexdist.backends.config import parse_job_name


class LogSource(Protocol):
    def read(self, name: str, offsets: dict[str, int], describe: Callable[[], JobStatus]) -> LogsPage:
        """New log text since `offsets`; `describe` reads the job when the source needs more than its name."""
        ...


class ConsoleLogLinks:
    """No log text: the Cloud Logging query that shows the job's replica logs."""

    def read(self, name: str, offsets: dict[str, int], describe: Callable[[], JobStatus]) -> LogsPage:
        status = describe()
        # A tuning job's trials log under the tuning job's own id.
        job = status.backing_job or (
            name if "/customJobs/" in name or "/hyperparameterTuningJobs/" in name else None
        )
        if job is None:
            return LogsPage(chunks=[], links=[status.console_url or ""])
        parts = parse_job_name(job) or {}
        query = quote(f'resource.type="ml_job"\nresource.labels.job_id="{parts.get("id", "")}"', safe="")
        link = f"https://console.cloud.google.com/logs/query;query={query}?project={parts.get('project', '')}"
        return LogsPage(chunks=[], links=[link])
