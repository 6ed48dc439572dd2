"""An emulator's data folder as other processes read it: which emulator serves it now, and which jobs it
holds, without starting one (`vertexdist status ID --emulator` finds the job and its project here).

A serving emulator keeps the folder's `.lock` (an exclusive flock) and writes its endpoints to
`endpoint.json` (the user's alone, like every file there); the lock, not the file, says it still serves,
so a file left by a killed emulator is never believed. Jobs are the store's files,
`resources/<collection>/<id>.json` (`emulator.store`), each holding its full resource name.

A client that knows only an emulator's Vertex endpoint (VERTEX_API_ENDPOINT, `--endpoint`) learns its Cloud
Storage endpoint from the folder when the emulator serving it is the one named, else by asking the emulator
itself (`ask`: GET ENDPOINTS_PATH, a vertexdist extension).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from vertexdist.private_files import write_private_json

ENDPOINT_FILE = "endpoint.json"
LOCK_FILE = ".lock"
JOB_COLLECTIONS = ("trainingPipelines", "hyperparameterTuningJobs", "customJobs")
POOL_COLLECTION = "persistentResources"
ENDPOINTS_PATH = "/vertexdist/v1/endpoints"
ASK_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class Endpoints:
    vertex: str
    storage: str


def write_endpoints(data_dir: Path, endpoints: Endpoints) -> None:
    write_private_json(
        data_dir / ENDPOINT_FILE,
        {"vertex": endpoints.vertex, "storage": endpoints.storage, "pid": os.getpid()},
    )


def remove_endpoints(data_dir: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (data_dir / ENDPOINT_FILE).unlink()


def _locked(data_dir: Path) -> bool:
    """Whether an emulator holds the folder's lock (taken and given back at once when none does)."""
    try:
        handle = open(data_dir / LOCK_FILE)  # noqa: SIM115 - closed below
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def serving(data_dir: Path) -> Endpoints | None:
    """The endpoints of the emulator serving `data_dir` now, or None when none does."""
    try:
        found = json.loads((data_dir / ENDPOINT_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not (isinstance(found, dict) and _locked(data_dir)):
        return None
    vertex, storage = found.get("vertex"), found.get("storage")
    return Endpoints(vertex, storage) if isinstance(vertex, str) and isinstance(storage, str) else None


def served_storage(data_dir: Path, vertex: str) -> str | None:
    """The storage endpoint of the emulator serving `data_dir`, when its Vertex endpoint is `vertex`."""
    found = serving(data_dir)
    return found.storage if found is not None and found.vertex == vertex.rstrip("/") else None


class NotAnEmulator(Exception):
    """The endpoint answered, but not as a vertexdist emulator does at ENDPOINTS_PATH."""


def ask(vertex: str, timeout_s: float = ASK_TIMEOUT_S) -> Endpoints:
    """The endpoints the emulator at `vertex` says it serves. OSError when nothing answers there (a refused
    connection, a timeout); NotAnEmulator when something else answers."""
    try:
        with urllib.request.urlopen(vertex.rstrip("/") + ENDPOINTS_PATH, timeout=timeout_s) as answer:
            found = json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        raise NotAnEmulator(f"it answered {exc.code} to {ENDPOINTS_PATH}") from None
    except ValueError:
        raise NotAnEmulator(f"its answer to {ENDPOINTS_PATH} is not JSON") from None
    storage = found.get("storage") if isinstance(found, dict) else None
    if not isinstance(storage, str) or not storage:
        raise NotAnEmulator(f"its answer to {ENDPOINTS_PATH} names no storage endpoint")
    return Endpoints(vertex.rstrip("/"), storage)


def resource_name(data_dir: Path, collection: str, ident: str) -> str | None:
    """The full name of the job `collection/ident` in `data_dir` (its project and location), or None."""
    if collection not in JOB_COLLECTIONS or not ident.isdigit():
        return None
    try:
        name = json.loads((data_dir / "resources" / collection / f"{ident}.json").read_text()).get("name")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) else None


def _names(data_dir: Path, ident: str = "*", collections: tuple[str, ...] = JOB_COLLECTIONS) -> list[str]:
    names = []
    for collection in collections:
        for path in sorted((data_dir / "resources" / collection).glob(f"{ident}.json")):
            try:
                name = json.loads(path.read_text()).get("name")
            except (OSError, ValueError, AttributeError):
                continue
            if isinstance(name, str):
                names.append(name)
    return names


def job_name(data_dir: Path, ident: str) -> str | None:
    """The full name of the job whose id is `ident` in `data_dir` (a pipeline first, as submit makes)."""
    if not ident.isdigit():
        return None
    found = _names(data_dir, ident)
    return found[0] if found else None


def parents(data_dir: Path) -> list[str]:
    """The `projects/P/locations/L` of every job in `data_dir`, each once, in name order."""
    return sorted({"/".join(name.split("/")[:4]) for name in _names(data_dir)})


def pool_name(data_dir: Path, ident: str) -> str | None:
    """The full name of the persistent resource whose id is `ident` in `data_dir`, or None."""
    if not re.fullmatch(r"[a-z][a-z0-9-]{0,62}", ident):
        return None
    found = _names(data_dir, ident, (POOL_COLLECTION,))
    return found[0] if found else None


def pool_parents(data_dir: Path) -> list[str]:
    """The `projects/P/locations/L` of every persistent resource in `data_dir`, each once, in name order."""
    return sorted({"/".join(name.split("/")[:4]) for name in _names(data_dir, "*", (POOL_COLLECTION,))})
