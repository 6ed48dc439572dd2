"""`local-run`'s live view on a terminal: a rich table, one line per replica (state, pid, exit code, last log
line), under the job's state and time."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from vertexdist.backends.base import JobEvent, JobHandle, ReplicaState
from vertexdist.cli.plain_text import plain

_STATE_STYLE = {
    ReplicaState.PENDING: "dim",
    ReplicaState.RUNNING: "cyan",
    ReplicaState.SUCCEEDED: "green",
    ReplicaState.FAILED: "bold red",
    ReplicaState.STOPPED: "yellow",
}


class LiveView:
    """A rich live table: one line per replica (state, pid, exit code, last log line) and the job state
    (a `jobs.local_run.JobView`, as `local_view`'s views are)."""

    def __init__(self, job_id: str, run_dir: Path) -> None:
        from rich.console import Console
        from rich.live import Live

        self._job_id = job_id
        self._run_dir = run_dir
        self._console = Console()
        self._last: dict[str, str] = {}
        self._message = ""
        self._started = time.monotonic()
        self._live = Live(console=self._console, refresh_per_second=8, transient=False)

    def start(self) -> None:
        self._live.start()

    def event(self, event: JobEvent) -> None:
        if event.replica is None and event.message:
            self._message = event.message

    def log(self, replica: str, line: str) -> None:
        line = plain(line)  # a table cell: the text, not the codes that colour or redraw it
        if line.strip():
            self._last[replica] = line

    def _render(self, job: JobHandle) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        table = Table(expand=True, show_edge=False, pad_edge=False)
        table.add_column("replica", no_wrap=True)
        table.add_column("state", no_wrap=True)
        table.add_column("pid", justify="right", no_wrap=True)
        table.add_column("exit", justify="right", no_wrap=True)
        table.add_column("last log line", overflow="ellipsis", no_wrap=True, ratio=1)
        for r in job.replicas():
            table.add_row(
                r.name,
                Text(r.state.value, style=_STATE_STYLE[r.state]),
                str(r.pid or ""),
                "" if r.exit_code is None else str(r.exit_code),
                Text(self._last.get(r.name, "")),
            )
        state = job.state
        style = {"JOB_STATE_SUCCEEDED": "bold green", "JOB_STATE_FAILED": "bold red"}.get(state.value, "bold")
        header = Text.assemble(
            ("job ", ""),
            (self._job_id, "bold"),
            "  ",
            (state.value, style),
            f"  {time.monotonic() - self._started:.1f}s",
            f"  restarts {job.restarts}" if job.restarts else "",
        )
        parts: list[Any] = [header, table]
        if self._message:
            parts.append(Text(self._message, style="dim"))
        return Group(*parts)

    def refresh(self, job: JobHandle) -> None:
        self._live.update(self._render(job))

    def stop(self) -> None:
        self._live.stop()
