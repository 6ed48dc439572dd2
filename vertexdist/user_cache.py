"""A cache folder this user can write: the folder's own `.vertexdist/cache/...` where it can, else one of this
user's own.

A folder several people share may hold a `.vertexdist/cache` that another user made first (root's first run,
say, 0755). Its packages are still good, but this user cannot add to it; so the cache moves to this user's
own, `$XDG_CACHE_HOME/vertexdist/<name>` (default `~/.cache/vertexdist/<name>`), made private (0700), and a
note names the folder that could not be used and whose it is.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from vertexdist.errors import VertexdistError

MODE = 0o700


@dataclass(frozen=True)
class CacheDir:
    path: Path
    note: str | None = None  # why the folder asked for is not the one used


def owner_of(path: Path) -> str:
    """The user name owning `path` (its uid when the name is unknown)."""
    import pwd

    uid = os.stat(path).st_uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _blocking(path: Path) -> Path:
    """The folder that stops this user from writing `path`: `path`, or its nearest existing parent."""
    for folder in (path, *path.parents):
        if folder.exists():
            return folder
    return path


def user_cache_root(env: Mapping[str, str] = os.environ) -> Path:
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "vertexdist"


def _writable(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def _private(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=MODE)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise OSError(f"{path} is not a folder of this user's")
    if stat.S_IMODE(info.st_mode) != MODE:
        os.chmod(path, MODE)


def usable_cache_dir(path: Path, env: Mapping[str, str] = os.environ) -> CacheDir:
    """`path` when this user can write it (made if missing); else this user's own cache of the same name."""
    if _writable(path):
        return CacheDir(path)
    blocked = _blocking(path)
    try:
        whose = owner_of(blocked)
    except OSError:
        whose = "another user"
    root = user_cache_root(env)
    fallback = root / path.name
    try:
        _private(root)
        _private(fallback)
    except OSError as exc:
        raise VertexdistError(
            f"cannot write the cache {path} ({blocked} belongs to {whose}), nor this user's own {fallback}:"
            f" {getattr(exc, 'strerror', None) or exc}",
            hint="set XDG_CACHE_HOME to a folder of yours, or ask the folder's owner to let you write it",
        ) from exc
    return CacheDir(
        fallback,
        f"note: {blocked} belongs to {whose} and is not writable by you; using your own cache {fallback}",
    )
