"""How the emulator hands a CustomJob to something that runs its replicas.

The emulator only needs start / poll / cancel / log files; `vertexdist.emulator.local_runner` adapts the
local runtime (`vertexdist.local`) to this, and tests can pass any runner with the same shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

RunState = Literal["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"]


@dataclass(frozen=True)
class LaunchRequest:
    """Everything a runner needs to start one CustomJob's replicas on this machine."""

    job_id: str
    spec: dict[str, Any]  # CustomJobSpec, proto-JSON camelCase, enums as names
    project: str
    region: str
    run_dir: Path  # this job's own folder (logs, working dirs)
    gcs_root: Path  # gs://B/p is <gcs_root>/B/p for the replicas
    fetch_package: Callable[[str], Path]  # packageUri -> local sdist file
    trial_id: str = ""  # a tuning trial's id; "" for a plain CustomJob
    hp_metric_dir: Path | None = None  # where a trial's replicas write their cloudml-hypertune files


@dataclass(frozen=True)
class RunStatus:
    state: RunState
    message: str = ""  # why it failed, naming the first failing replica


class RunningJob(Protocol):
    def poll(self) -> RunStatus: ...

    def cancel(self) -> None:
        """Stop every replica (SIGTERM, grace, SIGKILL); may block for the grace period."""
        ...

    def wait(self, timeout: float) -> bool:
        """Block until every replica is gone (True) or `timeout` passes (False)."""
        ...

    def log_files(self) -> dict[str, Path]:
        """Replica name (`workerpool0-0`) -> its combined stdout/stderr log file."""
        ...

    def pids(self) -> list[int]:
        """Process ids of the replicas now running (each leads its own process group)."""
        ...


class JobRunner(Protocol):
    def start(self, request: LaunchRequest) -> RunningJob: ...
