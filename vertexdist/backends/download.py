"""Copying a job's outputs into a folder: resumable, checked, never a half-written file under a real name.

Each file is fetched into `.<name>.<version>.part` beside where it goes (the version is the object's
generation, so a part of an older object is never continued), continued from the part's size after an
interruption (a part that received nothing is not kept), checked against the source's checksum (md5;
crc32c where Cloud Storage has no md5, as for composite objects) and only then renamed into place. A file
already there with the same checksum is skipped. A continued part that fails its check is fetched once more
from the start.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from vertexdist.backends.output_files import READ_BYTES, OutputFile, OutputSource, md5_base64, safe_relative
from vertexdist.errors import VertexdistError

PART_SUFFIX = ".part"
Progress = Callable[[OutputFile, int], None]  # a file, and how many more of its bytes are on disk


class DownloadError(VertexdistError):
    """A file did not arrive whole."""


@dataclass
class DownloadReport:
    downloaded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already there, same checksum
    resumed: dict[str, int] = field(default_factory=dict)  # path -> bytes already there from before
    bytes: int = 0


def crc32c_base64(path: Path) -> str:
    import google_crc32c  # installed with google-cloud-storage

    checksum = google_crc32c.Checksum()
    with open(path, "rb") as handle:
        while block := handle.read(READ_BYTES):
            checksum.update(block)
    return base64.b64encode(checksum.digest()).decode()


def local_checksum(path: Path, kind: str) -> str:
    return md5_base64(path) if kind == "md5" else crc32c_base64(path)


def part_path(final: Path, file: OutputFile) -> Path:
    version = hashlib.sha256(file.version.encode()).hexdigest()[:12]
    return final.with_name(f".{final.name}.{version}{PART_SUFFIX}")


def _stale_parts(final: Path, keep: Path) -> list[Path]:
    """Parts of the same file for other versions of it (an object overwritten since)."""
    if not final.parent.is_dir():
        return []
    start = f".{final.name}."
    return [
        p
        for p in final.parent.iterdir()
        if p.name.startswith(start) and p.name.endswith(PART_SUFFIX) and p != keep and p.is_file()
    ]


def download(
    source: OutputSource,
    files: list[OutputFile],
    dest: Path,
    *,
    progress: Progress | None = None,
) -> DownloadReport:
    """Copy `files` of `source` under `dest`, keeping their relative paths."""
    report = DownloadReport()
    for file in files:
        final = dest.joinpath(*safe_relative(file.path).parts)
        kind, expected = source.checksum(file)
        if final.is_file() and final.stat().st_size == file.size and local_checksum(final, kind) == expected:
            report.skipped.append(file.path)
            if progress is not None:
                progress(file, file.size)
            continue
        final.parent.mkdir(parents=True, exist_ok=True)
        part = part_path(final, file)
        for stale in _stale_parts(final, part):
            stale.unlink()
        had = part.stat().st_size if part.is_file() else 0
        if had > file.size:
            part.unlink()
            had = 0
        if had:
            report.resumed[file.path] = had
            if progress is not None:
                progress(file, had)
        try:
            _fetch(source, file, part, progress)
        except BaseException:
            if part.is_file() and part.stat().st_size == 0:
                part.unlink()  # nothing arrived: no part to continue from, so none is left behind
            raise
        if expected and local_checksum(part, kind) != expected and had:
            part.unlink()  # what was there before did not belong to this object after all: once more, whole
            _fetch(source, file, part, progress)
        got = local_checksum(part, kind) if expected else expected
        if got != expected:
            part.unlink()
            raise DownloadError(
                f"{file.path}: the copy's {kind} is {got}, the source's is {expected}",
                hint="run the download again; if it keeps failing, the object is changing as it is read",
            )
        os.replace(part, final)
        report.downloaded.append(file.path)
        report.bytes += file.size - had
    return report


def _fetch(source: OutputSource, file: OutputFile, part: Path, progress: Progress | None) -> None:
    """The rest of `file` appended to `part`; a retried fetch continues where the failed one stopped."""

    def rest() -> None:
        with open(part, "ab") as handle:
            start = handle.tell()
            if start >= file.size and file.size:
                return

            def write(chunk: bytes) -> None:
                handle.write(chunk)
                if progress is not None:
                    progress(file, len(chunk))

            source.read(file, start, write)
            handle.flush()
            os.fsync(handle.fileno())

    source.call(f"downloading {file.path}", rest)
