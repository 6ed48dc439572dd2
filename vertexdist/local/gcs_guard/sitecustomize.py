"""Where `/gcs` could not be made the job's Cloud Storage (`gcs_namespace`), Python code that touches it
fails with the reason and what to do, instead of a bare PermissionError, or of files on the host's own
`/gcs` (as root, say, in a container that may not make mount namespaces).

This folder is put first on the replica's PYTHONPATH, so every Python process of the replica (torchrun's
workers, Ray's) imports this module at start-up. It adds an audit hook (PEP 578) that raises
PermissionError(EACCES, <reason>, path) on any file operation under /gcs: open, mkdir, listdir, scandir,
rename, remove, chmod, ... Then it runs the sitecustomize this one hides, if there is one further on
sys.path (a distribution's, say). The reason comes in VERTEXDIST_GCS_UNMAPPED; without it nothing is done.
"""

from __future__ import annotations

import errno
import importlib.machinery
import importlib.util
import os
import sys
from typing import Any

_MOUNT = "/gcs"
_REASON = os.environ.get("VERTEXDIST_GCS_UNMAPPED", "")
# Audited file operations (the Python docs' audit events table) -> which arguments are paths.
_PATH_ARGS: dict[str, tuple[int, ...]] = {
    "open": (0,),
    "os.chdir": (0,),
    "os.chflags": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.link": (0, 1),
    "os.listdir": (0,),
    "os.mkdir": (0,),
    "os.remove": (0,),
    "os.rename": (0, 1),
    "os.rmdir": (0,),
    "os.scandir": (0,),
    "os.symlink": (0, 1),
    "os.truncate": (0,),
    "os.utime": (0,),
    "os.setxattr": (0,),
    "os.removexattr": (0,),
    "os.listxattr": (0,),
    "os.getxattr": (0,),
    "shutil.copyfile": (0, 1),
    "shutil.copytree": (0, 1),
    "shutil.rmtree": (0,),
    "shutil.move": (0, 1),
}


def _under_mount(path: Any) -> str | None:
    if isinstance(path, int) or path is None:
        return None
    try:
        text = os.fsdecode(os.fspath(path))
    except TypeError:
        return None
    if not text.startswith(_MOUNT):
        return None
    normal = os.path.normpath(text)
    return normal if normal == _MOUNT or normal.startswith(_MOUNT + "/") else None


def _hook(event: str, args: tuple[Any, ...]) -> None:
    where = _PATH_ARGS.get(event)
    if where is None:
        return
    for index in where:
        if index < len(args):
            path = _under_mount(args[index])
            if path is not None:
                raise PermissionError(errno.EACCES, f"vertexdist: {_REASON}", path)


def _chain() -> None:
    """Run the next `sitecustomize` on sys.path: this module must not hide a distribution's own."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == __file__:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


if _REASON:
    sys.addaudithook(_hook)
_chain()
