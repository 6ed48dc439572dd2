"""`local-run --resume-from RUN`: continue an earlier local run in its own output folder.

Each local run has its own gs:// namespace (`<run folder>/gcs`) and its own output folder in it, so no run
resumes another's checkpoints by accident. Resuming is explicit: the new run takes the earlier run's output
URI (from its `job.json`, or a tuning run's `request.json`) and the earlier run's gs:// namespace (its
`gcs` folder becomes a link to that one), so its replicas read and write the very files the earlier run
left, as a resumed Vertex job writes into the earlier job's gs:// folder. A run that resumed one can be
resumed in turn: the link leads on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from vertexdist.errors import UsageError
from vertexdist.render import output_dir_of
from vertexdist.wire.gcs_uri import is_gs_uri, local_gs_path

JOB_FILE = "job.json"
TUNING_FILE = "request.json"  # a tuning run's CreateHyperparameterTuningJob body
GCS_FOLDER = "gcs"


@dataclass(frozen=True)
class ResumedRun:
    """What a new run takes over from the earlier one."""

    run_dir: Path
    output_uri: str  # the earlier run's baseOutputDirectory
    gcs_root: Path  # where its gs:// lives on this machine (links resolved)


def local_path(uri: str, gcs_root: Path) -> Path:
    """Where `gs://B/p` lives for replicas with this gs:// root (VERTEXDIST_GCS_ROOT), or `uri` itself if it
    is a path."""
    return local_gs_path(uri, gcs_root) if is_gs_uri(uri) else Path(uri)


def find_run(ref: str, runs_dir: Path) -> ResumedRun:
    """The earlier run named by `ref`: a run id under `runs_dir`, or the path of a run folder."""
    candidates = [Path(ref), runs_dir / ref] if "/" in ref else [runs_dir / ref, Path(ref)]
    found = next(
        (c / name for c in candidates for name in (JOB_FILE, TUNING_FILE) if (c / name).is_file()), None
    )
    if found is None:
        raise UsageError(
            f"--resume-from {ref}: no earlier local run has that id or folder"
            f" (no {runs_dir / ref / JOB_FILE})",
            hint=f"use a run id from {runs_dir} (local-run prints it) or the run folder itself",
        )
    run_dir = found.parent
    try:
        uri = output_dir_of(json.loads(found.read_text()))
    except (OSError, ValueError, AttributeError):
        uri = None
    if not isinstance(uri, str) or not is_gs_uri(uri):
        raise UsageError(
            f"--resume-from {ref}: {found} names no gs:// output folder to resume",
            hint="resume a run made by local-run, which always has one",
        )
    return ResumedRun(run_dir=run_dir.resolve(), output_uri=uri.rstrip("/"), gcs_root=gcs_root_of(run_dir))


def gcs_root_of(run_dir: Path) -> Path:
    return (run_dir / GCS_FOLDER).resolve()


def link_gcs_root(run_dir: Path, resumed: ResumedRun) -> None:
    """Make the new run's gs:// namespace the earlier run's (a link, so resuming this run leads there too)."""
    link = run_dir / GCS_FOLDER
    resumed.gcs_root.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(resumed.gcs_root, target_is_directory=True)
