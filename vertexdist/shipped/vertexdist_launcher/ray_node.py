"""This replica's Ray node as processes: `ray start --block` under the launcher, and its teardown.

`ray start --block` stays the parent of the node's Ray processes (GCS, raylet, agents, workers), all in the
replica's process group, and is killed if the launcher dies (PR_SET_PDEATHSIG). The launcher is a child
subreaper, so a Ray process whose parent died (an agent left behind by a killed raylet) is re-parented to
the launcher rather than to init and is still found and killed at teardown. Never `ray stop`: it stops
every Ray process of the machine, other jobs' included.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PROC = Path("/proc")
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
# Below local-run's default grace (5 s) before it SIGKILLs a replica's group, so the launcher finishes its
# own teardown; `ray start` stops a node in 2-3 s once it no longer drains.
STOP_GRACE_S = 4.0
# Ray's unix sockets live at TEMP/session_<date>_<time>_<usec>_<pid>/sockets/plasma_store (62 characters
# after TEMP) and a socket path has at most 107; a longer temp folder is reached through a short link.
MAX_TEMP_DIR_CHARS = 40
LINKS_DIR = "vxray"


def _prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(None, use_errno=True).prctl


def become_subreaper() -> None:
    """Orphaned descendants are re-parented to this process instead of init (Linux)."""
    prctl = _prctl()
    if prctl is not None:
        prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def start_node(argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    """`ray start ... --block` as a child that gets SIGKILL when this process dies; output to `log_path`.

    Started while this process has no other threads (preexec_fn is not safe once gRPC's threads run).
    """
    prctl = _prctl()

    def die_with_parent() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(argv),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )


def _parents() -> dict[int, int]:
    """pid -> parent pid of every live (non-zombie) process."""
    found: dict[int, int] = {}
    for entry in PROC.iterdir() if PROC.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = entry.joinpath("stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 2 and fields[0] != "Z":
            found[int(entry.name)] = int(fields[1])
    return found


def descendants(root: int) -> list[int]:
    """The live descendants of `root`, parents before children."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    order: list[int] = []
    queue = list(children.get(root, ()))
    while queue:
        pid = queue.pop(0)
        order.append(pid)
        queue += children.get(pid, ())
    return order


def _reap_children() -> None:
    """Collect exited children that no Popen waits for (orphans re-parented to this subreaper)."""
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return


def stop_node(node: subprocess.Popen[bytes] | None, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM `ray start` (which stops its node), wait up to `grace_s`, then SIGKILL whatever this
    launcher still has below it. Only ever called once nothing else of the launcher runs."""
    if node is not None and node.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            node.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            node.wait(timeout=grace_s)
    deadline = time.monotonic() + grace_s
    while True:
        left = descendants(os.getpid())
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if node is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.wait(timeout=0.1)
        _reap_children()
        if time.monotonic() > deadline:
            break  # unkillable (D state): nothing more to do
        time.sleep(0.05)
    if node is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            node.wait(timeout=1)
    _reap_children()


def _links_dir() -> Path:
    """This user's folder of short links, `<temp>/vxray-<uid>` (0700): the temp folder is every user's, and
    one user's folder there is no other user's to write. Taken by another user: a fresh folder instead."""
    uid = os.getuid()
    links = _short_temp_base() / f"{LINKS_DIR}-{uid}"
    with contextlib.suppress(FileExistsError):
        links.mkdir(mode=0o700)
    info = os.lstat(links)
    if stat.S_ISDIR(info.st_mode) and info.st_uid == uid:
        return links
    return Path(tempfile.mkdtemp(prefix=f"{LINKS_DIR}-{uid}-", dir=_short_temp_base()))


def short_temp_dir(folder: Path) -> tuple[str, Path | None]:
    """A path for `folder` short enough for Ray's socket paths, and the link made for it (or None)."""
    folder.mkdir(parents=True, exist_ok=True)
    if len(str(folder)) <= MAX_TEMP_DIR_CHARS:
        return str(folder), None
    links = _links_dir()
    for old in links.iterdir():  # links left by launchers that were killed, to folders now gone
        if old.is_symlink() and not old.exists():
            with contextlib.suppress(OSError):
                old.unlink()
    link = links / hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    with contextlib.suppress(FileNotFoundError):
        link.unlink()
    link.symlink_to(folder, target_is_directory=True)
    return str(link), link


def _short_temp_base() -> Path:
    """The temp folder the replica's machine would give it: a local run gives each replica a TMPDIR of its
    own in the job's folder, as long as the folders the links are there to shorten, and says in
    VERTEXDIST_HOST_TMPDIR what it replaced."""
    return Path(os.environ.get("VERTEXDIST_HOST_TMPDIR") or tempfile.gettempdir())


def remove_link(link: Path | None) -> None:
    if link is not None:
        with contextlib.suppress(OSError):
            link.unlink()
        if link.parent.name.startswith(f"{LINKS_DIR}-{os.getuid()}-"):  # a fresh folder of _links_dir
            with contextlib.suppress(OSError):
                link.parent.rmdir()


def log_tail(path: Path, lines: int = 12) -> list[str]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]
