"""Files and folders vertexdist writes for a job are the user's alone: mode 0600, folders 0700.

A job's spec holds its env, secrets included, and its logs hold whatever the replicas print; on a shared
machine the default umask (022) would let every other user read them. Modes are set when the file is
created, so there is no moment in which another user could open it.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

FILE_MODE = 0o600
DIR_MODE = 0o700


def make_private_dir(path: Path) -> Path:
    """`path` and any missing parents, with `path` itself 0700 (also when it existed)."""
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    path.chmod(DIR_MODE)
    return path


def open_private(path: Path, flags: int) -> int:
    """A file descriptor of `path`, created 0600 (an existing file is made 0600 too)."""
    fd = os.open(path, flags | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    with contextlib.suppress(OSError):
        os.fchmod(fd, FILE_MODE)
    return fd


def write_private_text(path: Path, text: str) -> None:
    """Replace `path` atomically with `text`, mode 0600: a reader sees the old file or the new one."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_private_json(path: Path, data: Any) -> None:
    write_private_text(path, json.dumps(data, indent=2) + "\n")
