"""What `local-run` shows while a job runs: a rich live table on a terminal, prefixed log lines otherwise,
or JSON event lines (`--json`) for scripts. Every replica's full log stays in its file; views only tail them.
"""

from __future__ import annotations

import json
import queue
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from vertexdist.local.runner import JobEvent, JobResult, JobState, LocalJob, ReplicaState, ReplicaStatus

TAIL_LINES = 12


class LogFollower:
    """Reads the complete lines appended to each replica's log file since the last poll."""

    def __init__(self) -> None:
        self._offsets: dict[str, int] = {}
        self._partial: dict[str, bytes] = {}

    def poll(self, paths: dict[str, Path]) -> list[tuple[str, str]]:
        lines: list[tuple[str, str]] = []
        for name, path in paths.items():
            try:
                with open(path, "rb") as handle:
                    handle.seek(self._offsets.get(name, 0))
                    data = handle.read()
            except FileNotFoundError:
                continue
            if not data:
                continue
            self._offsets[name] = self._offsets.get(name, 0) + len(data)
            chunk = self._partial.pop(name, b"") + data
            *complete, rest = chunk.split(b"\n")
            if rest:
                self._partial[name] = rest
            lines.extend((name, raw.decode(errors="replace").rstrip("\r")) for raw in complete)
        return lines

    def flush(self) -> list[tuple[str, str]]:
        """Unterminated last lines, once the writers are gone."""
        rest = [(name, data.decode(errors="replace")) for name, data in self._partial.items() if data]
        self._partial.clear()
        return rest


def last_lines(path: Path, count: int = TAIL_LINES) -> list[str]:
    try:
        data = path.read_bytes()[-64 * 1024 :]
    except OSError:
        return []
    return data.decode(errors="replace").splitlines()[-count:]


def _event_dict(job_id: str, event: JobEvent) -> dict[str, Any]:
    if event.replica is not None:
        r = event.replica
        return {
            "event": "replica",
            "job_id": job_id,
            "time": event.time,
            "replica": r.name,
            "state": r.state.value,
            "pid": r.pid,
            "exit_code": r.exit_code,
            "attempt": r.attempt,
        }
    out: dict[str, Any] = {
        "event": "job",
        "job_id": job_id,
        "time": event.time,
        "state": event.job_state.value,
    }
    if event.message:
        out["message"] = event.message
    if event.error is not None:
        out["error"] = {
            "code": event.error.code,
            "message": event.error.message,
            "replica": event.error.replica,
        }
    return out


class View:
    """Base: receives events and log lines from the follow loop; prints nothing."""

    def start(self) -> None:
        pass

    def event(self, event: JobEvent) -> None:
        pass

    def log(self, replica: str, line: str) -> None:
        pass

    def refresh(self, job: LocalJob) -> None:
        pass

    def stop(self) -> None:
        pass


class PrefixedView(View):
    """`workerpool1-0 | line` for every log line, and one `vertexdist |` line per state change."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._width = len("workerpool0-0")

    def _line(self, who: str, text: str) -> None:
        self._width = max(self._width, len(who))
        self._out.write(f"{who:<{self._width}} | {text}\n")
        self._out.flush()

    def event(self, event: JobEvent) -> None:
        if event.replica is None:
            self._line("vertexdist", event.message or f"job {event.job_state.value}")
        elif event.replica.state not in (ReplicaState.RUNNING, ReplicaState.PENDING):
            r = event.replica
            self._line("vertexdist", f"{r.name} {r.state.value} (exit code {r.exit_code})")
        elif event.replica.state is ReplicaState.RUNNING:
            self._line("vertexdist", f"{event.replica.name} started, pid {event.replica.pid}")

    def log(self, replica: str, line: str) -> None:
        self._line(replica, line)


class JsonView(View):
    """One JSON object per line: job and replica state changes, and log lines."""

    def __init__(self, out: IO[str], job_id: str) -> None:
        self._out = out
        self._job_id = job_id

    def _write(self, obj: dict[str, Any]) -> None:
        self._out.write(json.dumps(obj) + "\n")
        self._out.flush()

    def event(self, event: JobEvent) -> None:
        self._write(_event_dict(self._job_id, event))

    def log(self, replica: str, line: str) -> None:
        self._write({"event": "log", "job_id": self._job_id, "replica": replica, "line": line})


_STATE_STYLE = {
    ReplicaState.PENDING: "dim",
    ReplicaState.RUNNING: "cyan",
    ReplicaState.SUCCEEDED: "green",
    ReplicaState.FAILED: "bold red",
    ReplicaState.STOPPED: "yellow",
}


class LiveView(View):
    """A rich live table: one line per replica (state, pid, exit code, last log line) and the job state."""

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
        if line.strip():
            self._last[replica] = line

    def _render(self, job: LocalJob) -> Any:
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

    def refresh(self, job: LocalJob) -> None:
        self._live.update(self._render(job))

    def stop(self) -> None:
        self._live.stop()


def follow(job: LocalJob, view: View, events: queue.Queue[JobEvent], *, interval_s: float = 0.1) -> JobResult:
    """Feed `view` with the job's events and new log lines until the job is done.

    If the view fails (stdout closed under `local-run ... | head`, say), the job is cancelled and waited for
    before the error goes on: its replicas run in their own sessions and would otherwise outlive local-run.
    """
    follower = LogFollower()
    try:
        view.start()
        _follow(job, view, events, follower, interval_s)
    except BaseException:
        job.cancel()
        job.wait()
        raise
    return job.result()


def _follow(
    job: LocalJob, view: View, events: queue.Queue[JobEvent], follower: LogFollower, interval_s: float
) -> None:
    try:
        while True:
            finished = job.done
            while True:
                try:
                    view.event(events.get_nowait())
                except queue.Empty:
                    break
            for name, line in follower.poll(job.log_paths()):
                view.log(name, line)
            if finished:
                for name, line in follower.flush():
                    view.log(name, line)
                view.refresh(job)
                break
            view.refresh(job)
            time.sleep(interval_s)
    finally:
        view.stop()


def choose_view(job_id: str, run_dir: Path, *, json_events: bool, out: IO[str] | None = None) -> View:
    stream = out or sys.stdout
    if json_events:
        return JsonView(stream, job_id)
    if stream.isatty():
        return LiveView(job_id, run_dir)
    return PrefixedView(stream)


def summary_lines(
    result: JobResult, run_dir: Path, *, tail: Callable[[Path], list[str]] = last_lines
) -> list[str]:
    """What to print once the job is done: its state, and for a failure the first failing replica's tail
    (the error message itself is the CLI's `error:` line)."""
    lines = [
        f"job {result.state.value} after {result.elapsed_s:.1f}s"
        + (f" ({result.restarts} restarts)" if result.restarts else "")
    ]
    error = result.error
    if result.state is JobState.SUCCEEDED:
        lines.append(f"logs: {run_dir / 'logs'}")
        return lines
    if error is not None:
        failed: ReplicaStatus | None = next((r for r in result.replicas if r.name == error.replica), None)
        if failed is not None:
            lines.append(f"last lines of {failed.log_path}:")
            lines.extend(f"  {line}" for line in tail(failed.log_path))
    return lines
