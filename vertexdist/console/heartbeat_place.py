"""Where a console job's heartbeats are: a local run's folder, the emulator's data folder, or (a Vertex job,
an emulator job whose folder the console does not know) its replicas' logs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from vertexdist.console.errors import NotFound
from vertexdist.console.refs import JobRef
from vertexdist.health.folder import HEALTH_DIR

if TYPE_CHECKING:
    from vertexdist.console.jobs import Console

FROM_LOGS: Literal["logs"] = "logs"  # the job's heartbeats are in its replicas' logs
TUNING_NOTE = "A tuning job's ranks are each trial's: open a trial."


def health_folder(console: Console, ref: JobRef) -> Path | str:
    """Where `ref`'s heartbeats are (`FROM_LOGS`: in its replicas' logs), or the note the panel shows
    instead; NotFound for no such job."""
    if console.is_tuning(ref):
        return TUNING_NOTE
    if ref.source == "local":
        backend, name = console._local_job(ref)
        run_dir = backend.run_dir(name)
        if not run_dir.is_dir():
            raise NotFound(f"no local job {ref.job}")
        return run_dir / HEALTH_DIR
    if not console._remote().target.is_emulator or console.emulator_dir is None:  # no remote: NotFound
        return FROM_LOGS
    from vertexdist.jobs.ranks import _emulator_dir

    found = _emulator_dir(ref.job, console.emulator_dir)
    if found is None:
        return "No heartbeats: the emulator's data folder holds no run of this job."
    return found / HEALTH_DIR
