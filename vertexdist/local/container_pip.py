"""This machine's pip settings for the emulator's container jobs, as its host-mode jobs already have them.

A job that runs on this host (no container runtime) inherits the emulator's environment, so `PIP_NO_INDEX`,
`PIP_FIND_LINKS` or a local `PIP_INDEX_URL` set where the emulator runs also hold for the job's
`pip install`. A job in a container would not see them, and where the daemon gives its networks no route
out (a daemon run without iptables, an offline machine) its `pip install` waits on an index it cannot reach:
the SDK's `CustomJob.from_local_script` with a custom image runs `pip install --upgrade pip && pip3 install
--user /gcs/...` in the container. So the same variables go into the containers, and the local folders they
name are mounted read-only at the same paths. `PIP_CERT` and other paths on this host stay out: the image
keeps its own CA bundle.

`container_pip` is pure (the environment and an existence check are arguments).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from urllib.parse import unquote, urlparse

# Where packages come from and how pip goes about it; nothing that names a file on this host but the sources.
PIP_VARIABLES = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_NO_INDEX",
    "PIP_NO_BUILD_ISOLATION",
    "PIP_TRUSTED_HOST",
    "PIP_DEFAULT_TIMEOUT",
    "PIP_RETRIES",
    "PIP_DISABLE_PIP_VERSION_CHECK",
    "PIP_PREFER_BINARY",
    "PIP_ONLY_BINARY",
    "PIP_NO_BINARY",
    "PIP_PRE",
)
_INDEXES = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")


@dataclass(frozen=True)
class ContainerPip:
    """The pip variables a job's containers get, and the host folders mounted read-only at the same path."""

    env: Mapping[str, str] = field(default_factory=dict)
    folders: tuple[str, ...] = ()


def local_source(word: str) -> str | None:
    """The absolute path a pip source names on this machine (`file://...` or a path), else None (pure)."""
    if word.startswith("file:"):
        path = unquote(urlparse(word).path)
    elif word.startswith("/"):
        path = word
    else:
        return None
    return str(PurePosixPath(path)) if path.startswith("/") else None


def container_pip(environ: Mapping[str, str], is_dir: Callable[[str], bool] = os.path.isdir) -> ContainerPip:
    """The emulator's pip settings for its job containers (pure but for `is_dir`).

    A find-links folder is mounted as it is; a local index (`file:///srv/pypi/simple`) with its parent, since
    a mirror's pages link to files beside `simple/` (`../../files/...`). Sources that are not folders here
    (a URL, a path that does not exist) pass as they are, unmounted."""
    env = {key: environ[key] for key in PIP_VARIABLES if environ.get(key)}
    folders: dict[str, None] = {}
    for key in ("PIP_FIND_LINKS", *_INDEXES):
        for word in env.get(key, "").split():
            path = local_source(word)
            if path is None or not is_dir(path):
                continue
            if key in _INDEXES and path != "/":
                path = str(PurePosixPath(path).parent)
            folders[path] = None
    return ContainerPip(env, tuple(sorted(folders)))
