"""Checkpoints that a crash mid-write cannot damage, on a local disk or on Cloud Storage FUSE (/gcs).

Layout: `<dir>/step-00000040/state.pt`, then `<dir>/LATEST` naming that folder, written last. Files are
written to a temporary name and `os.replace`d; folders are never renamed (gcsfuse does not rename folders on
flat buckets). A step folder newer than LATEST is an interrupted write and is ignored; if the folder LATEST
names does not load, the newest older one that does is used.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import torch

from trainer_pkg.errors import TrainerError

LATEST = "LATEST"
STATE_FILE = "state.pt"
FORMAT_VERSION = 1
_STEP_DIR = re.compile(r"^step-(\d{8,})$")


def step_dir_name(step: int) -> str:
    return f"step-{step:08d}"


def write_atomic(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write through a temporary file in the same folder, fsync, then replace `path` in one step."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with tmp.open("wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    # Makes the rename durable on local disks; FUSE mounts may refuse, and then there is nothing more to do.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _step_dirs(root: Path) -> dict[int, Path]:
    if not root.is_dir():
        return {}
    found: dict[int, Path] = {}
    for entry in root.iterdir():
        match = _STEP_DIR.match(entry.name)
        if match and entry.is_dir():
            found[int(match.group(1))] = entry
    return found


def _read_latest(root: Path) -> int | None:
    try:
        text = (root / LATEST).read_text().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, UnicodeDecodeError) as exc:
        _warn(f"cannot read {root / LATEST} ({exc}); looking for step folders instead")
        return None
    match = _STEP_DIR.match(text)
    if not match:
        _warn(f"{root / LATEST} says {text[:40]!r}, not a step folder; looking for step folders instead")
        return None
    return int(match.group(1))


def _warn(message: str) -> None:
    print(f"trainer_pkg: warning: {message}", file=sys.stderr, flush=True)


def candidates(root: Path) -> list[Path]:
    """Step folders to try, best first: the one LATEST names, then older ones, newest first."""
    steps = _step_dirs(root)
    latest = _read_latest(root)
    if latest is None:
        return [steps[s] for s in sorted(steps, reverse=True)]
    newer = sorted(s for s in steps if s > latest)
    if newer:
        names = ", ".join(steps[s].name for s in newer)
        _warn(f"ignoring {names} in {root}: written after {LATEST}, so unfinished")
    return [steps[s] for s in sorted((s for s in steps if s <= latest), reverse=True)]


@dataclass(frozen=True)
class Loaded:
    path: Path
    state: dict[str, Any]


def load_newest(root: Path) -> Loaded | None:
    """The newest checkpoint under `root` that loads, or None when there is none."""
    for folder in candidates(root):
        path = folder / STATE_FILE
        try:
            state = torch.load(path, map_location="cpu", weights_only=False)
        except FileNotFoundError:
            _warn(f"{folder} has no {STATE_FILE}; trying an older checkpoint")
            continue
        except Exception as exc:  # a truncated or corrupt file fails in many ways inside the unpickler
            _warn(f"{path} does not load ({type(exc).__name__}: {exc}); trying an older checkpoint")
            continue
        if not isinstance(state, dict) or state.get("format") != FORMAT_VERSION:
            raise TrainerError(f"{path} is not a trainer_pkg checkpoint (format {FORMAT_VERSION})")
        return Loaded(path, state)
    return None


def save(root: Path, step: int, state: dict[str, Any], *, keep: int) -> Path:
    """Write `state` as the checkpoint of `step`, point LATEST at it, and keep only the `keep` newest."""
    folder = root / step_dir_name(step)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / STATE_FILE, lambda handle: torch.save({**state, "format": FORMAT_VERSION}, handle))
    write_atomic(root / LATEST, lambda handle: handle.write(f"{folder.name}\n".encode()))
    for old in sorted(_step_dirs(root))[:-keep] if keep else []:
        if old < step:
            shutil.rmtree(root / step_dir_name(old), ignore_errors=True)
    return folder
