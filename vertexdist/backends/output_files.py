"""What a job's outputs are made of, wherever they are kept: a file's name, size, version and checksums
(`OutputFile`), the shape of a place that lists and reads them (`OutputSource`), and the checks a copy of
them makes (`safe_relative`, `md5_base64`, and `linked_folder` / `reached_within` for a folder a job may
have replaced by a symbolic link). `backends.outputs` has the places; `backends.download` copies.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from vertexdist.errors import VertexdistError

READ_BYTES = 1 << 20


class NoOutputs(VertexdistError):
    """The job names no output folder, or its folder cannot be read."""


@dataclass(frozen=True)
class OutputFile:
    path: str  # relative to the output folder, `/`-separated
    size: int
    version: str  # changes whenever the file does (a GCS generation; size and mtime locally)
    md5: str | None = None  # base64 of the digest, as Cloud Storage's md5Hash
    crc32c: str | None = None  # base64 of the big-endian value, as Cloud Storage's crc32c


class OutputSource(Protocol):
    uri: str  # where the outputs are, as the job names it (gs://B/prefix)

    def files(self) -> list[OutputFile]: ...

    def read(self, file: OutputFile, start: int, write: Any) -> None:
        """Pass the file's bytes from `start` to `write(chunk)`, in order."""
        ...

    def checksum(self, file: OutputFile) -> tuple[str, str]:
        """("md5" | "crc32c", base64 value) of the file as the source has it."""
        ...

    def call(self, what: str, fetch: Callable[[], Any]) -> Any:
        """Run a fetch under the source's retry policy (a retried fetch continues where it stopped)."""
        ...


def safe_relative(path: str) -> PurePosixPath:
    """An object's path under the output folder, refused if it would land outside the download folder."""
    relative = PurePosixPath(path)
    if relative.is_absolute() or not relative.parts or ".." in relative.parts or "\\" in path:
        raise NoOutputs(f"refusing to download {path!r}: it names a place outside the download folder")
    return relative


def md5_base64(path: Path) -> str:
    import base64

    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        while block := handle.read(READ_BYTES):
            digest.update(block)
    return base64.b64encode(digest.digest()).decode()


def linked_folder(root: Path, path: Path) -> Path | None:
    """The first of `path` and the folders between `root` and it that is a symbolic link, or None.

    A job writes under `root` (its gs:// root): a link there is the job's, and whatever it points to (say
    /etc, or another job's folder) is not the job's output. `root` itself may be a link (the user's)."""
    current = Path(root)
    for part in Path(path).relative_to(root).parts:
        current = current / part
        if current.is_symlink():
            return current
    return None


def reached_within(folder: Path, path: Path) -> bool:
    """Whether `path`, with every link resolved, is still inside `folder` (resolved too): checked again
    just before a file is read, as a job may replace a folder by a link after it was listed."""
    real_folder = os.path.realpath(folder)
    return os.path.realpath(path).startswith(real_folder.rstrip(os.sep) + os.sep)
