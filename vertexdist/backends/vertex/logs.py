"""Where the Vertex backend reads a job's replica logs: a `LogSource` it is given (default: Cloud Logging,
`cloud_logging.CloudLoggingSource`, which reads the emulator's Logging API the very same way), and the Logs
Explorer link that shows them in the console."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol
from urllib.parse import quote

from vertexdist.backends.base import JobStatus, LogQuery, LogsPage


class LogSource(Protocol):
    def read(
        self, name: str, cursor: object | None, query: LogQuery, describe: Callable[[], JobStatus]
    ) -> LogsPage:
        """Log lines after `cursor`; `describe` reads the job when the source needs more than its name."""
        ...


def logs_console_url(job: str) -> str | None:
    """The Logs Explorer query for a CustomJob's (or tuning job's) replica logs; None for other names."""
    project, _, rest = job.removeprefix("projects/").partition("/locations/")
    parts = rest.split("/")
    if len(parts) != 3 or parts[1] not in ("customJobs", "hyperparameterTuningJobs"):
        return None
    query = quote(f'resource.type="ml_job"\nresource.labels.job_id="{parts[2]}"', safe="")
    return f"https://console.cloud.google.com/logs/query;query={query}?project={project}"


def where_logs_are(status: JobStatus) -> str | None:
    """The console page with a Vertex job's logs: the Logs Explorer for its CustomJob, else its own page."""
    return logs_console_url(status.backing_job or status.name) or status.console_url
