"""`/gcs/BUCKET/...` on every local replica, as Cloud Storage FUSE gives it on Vertex: the job's own gs://
folder, for any user, without touching the host's `/gcs` (how: `gcs_namespace`).

`launch_argv` puts a replica's command behind `gcs_namespace.py`, which maps the folder in a mount namespace
of the replica's own and execs the command (its children inherit the namespace). `problem()` says, once per
process, whether that can work on this machine (a probe: the same script on an empty folder); where it
cannot, replicas run unwrapped with `guard_env` (the reason, and the guard's sitecustomize on PYTHONPATH),
and the runner says why once, at the job's start.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from vertexdist.local import gcs_guard
from vertexdist.local.gcs_namespace import MOUNT_POINT, UNMAPPED_VARIABLE

SCRIPT = Path(__file__).with_name("gcs_namespace.py")
GUARD_DIR = Path(gcs_guard.__file__).parent
STAGE_DIR = ".gcs-namespace"  # in the run folder: the empty folder the replicas' new root is mounted on
PROBE_TIMEOUT_S = 30.0

_lock = threading.Lock()
_probed: dict[str, str | None] = {}


def _probe(python: str) -> str | None:
    with tempfile.TemporaryDirectory(prefix="vertexdist-gcs-probe-") as scratch:
        folder, stage = Path(scratch, "gcs"), Path(scratch, "stage")
        folder.mkdir()
        stage.mkdir()
        try:
            result = subprocess.run(
                [python, "-I", "-S", str(SCRIPT), "--probe", str(folder), str(stage)],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"/gcs is not this job's Cloud Storage here: its probe could not run ({exc})"
    if result.returncode == 0:
        return None
    lines = (result.stdout or result.stderr).strip().splitlines()
    return lines[-1] if lines else f"/gcs is not this job's Cloud Storage here (exit {result.returncode})"


def problem(python: str = sys.executable) -> str | None:
    """None if replicas started by `python` get `/gcs` here; else why not and what to do (one line)."""
    with _lock:
        if python not in _probed:
            _probed[python] = _probe(python)
        return _probed[python]


def stage_dir(run_dir: Path) -> Path:
    return run_dir / STAGE_DIR


def launch_argv(
    argv: Sequence[str], gcs_root: Path, run_dir: Path, python: str = sys.executable
) -> tuple[str, ...]:
    """`argv` behind the script that maps `gcs_root` at /gcs for it and everything it starts (pure)."""
    return (
        python,
        "-I",
        "-S",
        str(SCRIPT),
        str(gcs_root),
        str(stage_dir(run_dir)),
        str(GUARD_DIR),
        "--",
        *argv,
    )


def guard_env(env: Mapping[str, str], reason: str) -> dict[str, str]:
    """A replica's variables where /gcs is not mapped: the reason, and the guard first on PYTHONPATH."""
    path = env.get("PYTHONPATH", "")
    return {
        **env,
        UNMAPPED_VARIABLE: reason,
        "PYTHONPATH": f"{GUARD_DIR}:{path}" if path else str(GUARD_DIR),
    }


def host_has_gcs() -> bool:
    """Whether the host has an entry at /gcs (for tests that check it is never made)."""
    return Path(MOUNT_POINT).exists() or Path(MOUNT_POINT).is_symlink()


def remove_stage(run_dir: Path) -> None:
    """The empty stage folder, once no replica needs it."""
    shutil.rmtree(stage_dir(run_dir), ignore_errors=True)
