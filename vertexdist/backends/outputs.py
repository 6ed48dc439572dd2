"""A job's outputs: the files under its base output directory (model, checkpoints, metrics), read from where
they are kept: Cloud Storage (`backends.vertex.outputs`), or a run folder for a local job (`FolderOutputs`).

The folder is the job's own `baseOutputDirectory.outputUriPrefix`, read from its spec (never worked out
again: how a job's default folder is named is render's business).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from vertexdist.backends.output_files import (
    READ_BYTES,
    NoOutputs,
    OutputFile,
    OutputSource,
    linked_folder,
    md5_base64,
    safe_relative,
)
from vertexdist.wire.gcs_uri import local_gs_path, parse_gs_uri

# AIP_TENSORBOARD_LOG_DIR is `<output folder>/logs/` on Vertex and here (`local.environment.output_dirs`).
TENSORBOARD_FOLDER = "logs"
# Where the outputs' own types live (`backends.output_files`); importers of this module find them here too.
__all__ = [
    "READ_BYTES",
    "TENSORBOARD_FOLDER",
    "FolderOutputs",
    "NoOutputs",
    "OutputFile",
    "OutputSource",
    "is_event_file",
    "md5_base64",
    "output_uri",
    "require_output_uri",
    "safe_relative",
    "tensorboard_folder",
]


def output_uri(spec: Mapping[str, Any]) -> str | None:
    """The job's output folder from its CustomJobSpec (`baseOutputDirectory.outputUriPrefix`)."""
    base = spec.get("baseOutputDirectory") or {}
    prefix = base.get("outputUriPrefix") if isinstance(base, Mapping) else None
    return str(prefix).rstrip("/") if prefix else None


def require_output_uri(name: str, spec: Mapping[str, Any]) -> str:
    uri = output_uri(spec)
    if uri is None:
        raise NoOutputs(
            f"{name} names no output folder (its spec has no baseOutputDirectory)",
            hint="set base_output_dir in the template; its model then goes to <base_output_dir>/model",
        )
    return uri


class FolderOutputs:
    """A local job's outputs: `gs://B/p` is `<gcs root>/B/p` on this machine (what its replicas wrote)."""

    def __init__(self, uri: str, gcs_root: Path) -> None:
        self.uri = uri
        parse_gs_uri(uri, what="the output folder")
        self.gcs_root = gcs_root
        self.folder = local_gs_path(uri.rstrip("/"), gcs_root)

    def files(self) -> list[OutputFile]:
        """What the job wrote: nothing when its output folder (or a folder above it under the gs:// root) is a
        symbolic link, as whatever it points to is not the job's (as in the emulator)."""
        found: list[OutputFile] = []
        if self.folder.exists() and linked_folder(self.gcs_root, self.folder) is not None:
            return found
        for path in sorted(self._walk()):
            stat = path.stat()
            found.append(
                OutputFile(
                    path=path.relative_to(self.folder).as_posix(),
                    size=stat.st_size,
                    version=f"{stat.st_size}-{stat.st_mtime_ns}",
                )
            )
        return found

    def _walk(self) -> Iterator[Path]:
        for root, _dirs, names in os.walk(self.folder):
            for name in names:
                path = Path(root, name)
                if path.is_file() and not path.is_symlink():
                    yield path

    def read(self, file: OutputFile, start: int, write: Any) -> None:
        with open(self.folder / file.path, "rb") as handle:
            handle.seek(start)
            while block := handle.read(READ_BYTES):
                write(block)

    def checksum(self, file: OutputFile) -> tuple[str, str]:
        return "md5", md5_base64(self.folder / file.path)

    def call(self, what: str, fetch: Callable[[], Any]) -> Any:
        return fetch()


def is_event_file(path: str) -> bool:
    """A TensorBoard event file (`events.out.tfevents.<time>.<host>...`), by its name."""
    return ".tfevents." in path.rsplit("/", 1)[-1]


def tensorboard_folder(source: OutputSource, cache: Path) -> Path:
    """A folder on this machine with the job's TensorBoard event files (each run a subfolder): a local
    job's own, else a copy under `cache`, brought up to date (only files that changed are fetched)."""
    if isinstance(source, FolderOutputs):
        return source.folder / TENSORBOARD_FOLDER
    from vertexdist.backends.download import download

    prefix = f"{TENSORBOARD_FOLDER}/"
    download(
        source, [f for f in source.files() if f.path.startswith(prefix) and is_event_file(f.path)], cache
    )
    return cache / TENSORBOARD_FOLDER
