"""This user's own folder in the shared temp folder, for state that processes of one user share (port
claims): `<temp>/vertexdist-<uid>`, mode 0700.

The temp folder is every user's. A folder of a fixed name there that another user made first (root's first
run, say, or someone who wants this user's runs to fail) must not stop this user, and what another user left
must never be read as this user's state. So the folder is used only if it is a real folder (not a link) that
this user owns, made private if it is not yet; otherwise the next name (`vertexdist-<uid>-1`, ...) is tried.
Every process of the user walks the same names in the same order, so they all agree on one folder.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from vertexdist.errors import VertexdistError

MODE = 0o700
MAX_TRIES = 20


def _usable(path: Path, uid: int) -> bool:
    """Whether `path` is this user's own private folder, making it so (created or tightened) if it can."""
    try:
        path.mkdir(mode=MODE)
    except FileExistsError:
        pass
    except OSError:
        return False
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
        return False
    if stat.S_IMODE(info.st_mode) != MODE:
        try:
            os.chmod(path, MODE)
        except OSError:
            return False
    return True


def user_base_dir(temp: Path | None = None) -> Path:
    """This user's folder in `temp` (the temp folder by default), created 0700 if missing."""
    root = Path(temp or tempfile.gettempdir())
    uid = os.getuid()
    names = [f"vertexdist-{uid}", *(f"vertexdist-{uid}-{n}" for n in range(1, MAX_TRIES))]
    for name in names:
        if _usable(root / name, uid):
            return root / name
    raise VertexdistError(
        f"no folder of this user (uid {uid}) can be made in {root}: {root / names[0]} and the"
        f" {MAX_TRIES - 1} names after it are taken by other users or cannot be created",
        hint=f"set TMPDIR to a folder of your own, or remove the stale {root}/vertexdist-{uid}* folders",
    )


def user_temp_dir(name: str, temp: Path | None = None) -> Path:
    """`<this user's folder>/<name>`, created (0700) if missing."""
    path = user_base_dir(temp) / name
    path.mkdir(mode=MODE, exist_ok=True)
    return path
