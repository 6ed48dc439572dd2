"""The build context: which files, their content hash, and a byte-for-byte reproducible `.tar.gz` of them.

Same files give the same bytes and the same hash, whatever the file times, owners or umask: entries are
sorted, mtimes are 0, uid/gid 0 with no names, modes become 0644 or 0755 (the executable bit is all that
survives a git checkout), and the gzip header carries no name and mtime 0. The hash covers the file list
(path, mode, sha256 of the content), the Dockerfile path and the build args, so it names the image.
Walking the folder is the only part that touches the file system besides reading the files themselves.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from vertexdist.container.ignore import (
    DEFAULT_GCLOUDIGNORE,
    VENV_MARKER,
    DockerIgnore,
    GitIgnore,
    always_excluded_dir,
    always_excluded_file,
    parse_dockerignore,
    parse_gitignore,
)
from vertexdist.errors import VertexdistError
from vertexdist.sizes import human_size

DEFAULT_MAX_CONTEXT_BYTES = 256 * 1024 * 1024
HASH_SCHEME = "vertexdist-context/1"
TAG_PREFIX = "ctx-"
TAG_HEX_CHARS = 20


class ContextError(VertexdistError):
    """The build context cannot be made (too large, Dockerfile outside it, files changing under us)."""


@dataclass(frozen=True)
class ContextEntry:
    """One file (or symlink) sent to the builder."""

    path: str
    source: Path
    size: int
    executable: bool = False
    link_target: str | None = None

    @property
    def mode(self) -> int:
        return 0o777 if self.link_target is not None else (0o755 if self.executable else 0o644)


@dataclass(frozen=True)
class Exclusion:
    """A file or folder left out, and which rule left it out (shown by `--dry-run`)."""

    path: str
    reason: str


@dataclass(frozen=True)
class BuildContext:
    """The selected files of a context folder, sorted by path."""

    root: Path
    dockerfile: str
    entries: tuple[ContextEntry, ...]
    excluded: tuple[Exclusion, ...] = field(default=())

    @property
    def total_bytes(self) -> int:
        return sum(e.size for e in self.entries)

    def paths(self) -> list[str]:
        return [e.path for e in self.entries]


def parse_size(text: str) -> int:
    """`512M`, `1G`, `300MiB`, `1000000` -> bytes."""
    units = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
    cleaned = text.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (cleaned[:-1], cleaned[-1]) if cleaned[-1:] in "KMG" else (cleaned, "")
    try:
        value = float(number) * units[unit]
    except (ValueError, KeyError):
        raise VertexdistError(
            f"{text!r} is not a size", hint="write a number of bytes or use K, M or G, e.g. 512M"
        ) from None
    if value <= 0:
        raise VertexdistError(f"size {text!r} must be positive")
    return int(value)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        return None


def load_ignore_rules(root: Path) -> tuple[DockerIgnore, GitIgnore]:
    """The context's `.dockerignore` and `.gcloudignore` rules (gcloud's default when it has none)."""
    docker = DockerIgnore(parse_dockerignore(_read_text(root / ".dockerignore") or ""))
    gcloud_text = _read_text(root / ".gcloudignore")
    if gcloud_text is None:
        gcloud_text = DEFAULT_GCLOUDIGNORE + (
            "#!include:.gitignore\n" if (root / ".gitignore").is_file() else ""
        )

    def read_include(name: str) -> str | None:
        return _read_text(root / name)

    return docker, GitIgnore(parse_gitignore(gcloud_text, read_include=read_include))


def collect_context(
    root: Path, dockerfile: Path, *, max_bytes: int = DEFAULT_MAX_CONTEXT_BYTES
) -> BuildContext:
    """Walk `root` and keep what the ignore rules allow; refuse a context over `max_bytes`."""
    root = root.resolve()
    dockerfile = dockerfile.resolve()
    try:
        dockerfile_rel = dockerfile.relative_to(root).as_posix()
    except ValueError:
        raise ContextError(
            f"the Dockerfile {str(dockerfile)!r} is outside the build context {str(root)!r}",
            hint="move it into the context folder or point build.context at a folder that holds it",
        ) from None
    docker, gcloud = load_ignore_rules(root)
    # The builder needs these even when the ignore files list them (Docker sends them regardless).
    control = {dockerfile_rel, ".dockerignore", ".gcloudignore"}
    entries: list[ContextEntry] = []
    excluded: list[Exclusion] = []
    _walk(root, "", docker, gcloud, control, entries, excluded)
    # One global order by path (not the walk's per-folder order), so the list reads the same everywhere.
    entries.sort(key=lambda e: e.path)
    excluded.sort(key=lambda x: x.path)
    context = BuildContext(root, dockerfile_rel, tuple(entries), tuple(excluded))
    check_size(context, max_bytes)
    return context


def _walk(
    folder: Path,
    rel: str,
    docker: DockerIgnore,
    gcloud: GitIgnore,
    control: set[str],
    entries: list[ContextEntry],
    excluded: list[Exclusion],
) -> None:
    with os.scandir(folder) as it:
        found = sorted(it, key=lambda e: e.name)
    for entry in found:
        rel_path = f"{rel}/{entry.name}" if rel else entry.name
        if entry.is_dir(follow_symlinks=False):
            reason = _dir_exclusion(entry, rel_path, docker, gcloud)
            if reason is not None:
                excluded.append(Exclusion(rel_path + "/", reason))
                continue
            _walk(Path(entry.path), rel_path, docker, gcloud, control, entries, excluded)
            continue
        if rel_path not in control:
            reason = _file_exclusion(entry.name, rel_path, docker, gcloud)
            if reason is not None:
                excluded.append(Exclusion(rel_path, reason))
                continue
        if entry.is_symlink():
            entries.append(ContextEntry(rel_path, Path(entry.path), 0, link_target=os.readlink(entry.path)))
            continue
        st = entry.stat(follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            excluded.append(Exclusion(rel_path, "not a regular file"))
            continue
        entries.append(ContextEntry(rel_path, Path(entry.path), st.st_size, bool(st.st_mode & 0o111)))


def _dir_exclusion(
    entry: os.DirEntry[str], rel_path: str, docker: DockerIgnore, gcloud: GitIgnore
) -> str | None:
    if always_excluded_dir(entry.name):
        return "always excluded"
    if os.path.exists(os.path.join(entry.path, VENV_MARKER)):
        return "always excluded (virtualenv)"
    if gcloud.ignored(rel_path, is_dir=True):
        return ".gcloudignore"
    if docker.excluded(rel_path) and not docker.may_reinclude_under(rel_path):
        return ".dockerignore"
    return None


def _file_exclusion(name: str, rel_path: str, docker: DockerIgnore, gcloud: GitIgnore) -> str | None:
    why = always_excluded_file(name)
    if why is not None:
        return f"always excluded ({why})"
    if gcloud.ignored(rel_path, is_dir=False):
        return ".gcloudignore"
    if docker.excluded(rel_path):
        return ".dockerignore"
    return None


def check_size(context: BuildContext, max_bytes: int, *, largest: int = 5) -> None:
    """Refuse a context over the limit, naming its largest files (usually data that belongs in GCS)."""
    total = context.total_bytes
    if total <= max_bytes:
        return
    top = sorted(context.entries, key=lambda e: (-e.size, e.path))[:largest]
    names = ", ".join(f"{e.path} ({human_size(e.size)})" for e in top)
    raise ContextError(
        f"the build context {str(context.root)!r} is {human_size(total)}, over the limit of "
        f"{human_size(max_bytes)}; largest files: {names}",
        hint="list data and build outputs in .dockerignore (or .gcloudignore), or raise --max-context-size",
    )


def manifest(context: BuildContext, digests: Mapping[str, str], build_args: Mapping[str, str]) -> bytes:
    """The canonical text the content hash is taken over (pure)."""
    lines = [HASH_SCHEME, "dockerfile " + json.dumps(context.dockerfile)]
    lines += [f"build-arg {json.dumps(k)} {json.dumps(build_args[k])}" for k in sorted(build_args)]
    for e in context.entries:
        if e.link_target is not None:
            lines.append(f"link {json.dumps(e.link_target)} {json.dumps(e.path)}")
        else:
            lines.append(f"file {e.mode:o} {digests[e.path]} {json.dumps(e.path)}")
    return ("\n".join(lines) + "\n").encode()


def _read(entry: ContextEntry) -> bytes:
    return entry.source.read_bytes()


def content_hash(context: BuildContext, build_args: Mapping[str, str] | None = None) -> str:
    """sha256 (hex) of the context's files, Dockerfile path and build args."""
    digests = {e.path: hashlib.sha256(_read(e)).hexdigest() for e in context.entries if e.link_target is None}
    return hashlib.sha256(manifest(context, digests, build_args or {})).hexdigest()


def image_tag(hash_hex: str) -> str:
    """The image tag for a content hash (a valid Docker tag, short enough to read)."""
    return TAG_PREFIX + hash_hex[:TAG_HEX_CHARS]


def write_context_tar(
    context: BuildContext,
    out: BinaryIO,
    build_args: Mapping[str, str] | None = None,
    *,
    compresslevel: int = 6,
) -> str:
    """Write the reproducible `.tar.gz` to `out`; returns the content hash of exactly the bytes written."""
    digests: dict[str, str] = {}
    with (
        gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=compresslevel) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for e in context.entries:
            info = tarfile.TarInfo(e.path)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = e.mode
            if e.link_target is not None:
                info.type = tarfile.SYMTYPE
                info.linkname = e.link_target
                tar.addfile(info)
                continue
            data = _read(e)
            digests[e.path] = hashlib.sha256(data).hexdigest()
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(manifest(context, digests, build_args or {})).hexdigest()
