"""Python-package form of a training job: a deterministic sdist of the trainer, its URI, and a local install.

Vertex runs a `pythonPackageSpec` by pip-installing `packageUris` and running `python -m <module>`
(https://cloud.google.com/vertex-ai/docs/training/create-python-pre-built-container). The layout follows
google-cloud-aiplatform's own packager: a script becomes package `aiplatform_custom_trainer_script` with
`task.py`. Unlike the SDK's (timestamped) sdist, this one is byte-for-byte reproducible, so its sha256
names it and an unchanged package is never uploaded or installed twice. Every sdist also carries the
shipped launcher as the top-level package `vertexdist_launcher`, so `python -m vertexdist_launcher` runs
wherever the package is installed (on Vertex and here).

A package folder ships what the build context would (the same always-excluded folders, secret and cache
files: `vertexdist.container.ignore`) and nothing from outside itself: a symlink is shipped as the content
it points to when that is inside the package; out of it, dangling, or looping, it is an error naming it.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from vertexdist.container.ignore import VENV_MARKER, always_excluded_dir, always_excluded_file
from vertexdist.errors import VertexdistError
from vertexdist.shipped import LAUNCHER_DIR, LAUNCHER_PACKAGE
from vertexdist.shipped.vertexdist_launcher.health import SOURCE_FILE

SCRIPT_PACKAGE = "aiplatform_custom_trainer_script"
DEFAULT_VERSION = "0.1"
# 1980-01-01: the oldest time every archive format downstream (zip wheels included) accepts.
_FIXED_MTIME = 315532800
# Build leftovers of the package itself; secrets, caches and virtualenvs are the build context's rules.
_BUILD_LEFTOVER_DIR_SUFFIX = ".egg-info"
_BUILD_LEFTOVER_FILE_SUFFIX = ".so.tmp"


class TrainerSource(Protocol):
    """What packaging needs of a template's `trainer` section."""

    @property
    def package(self) -> Path | None: ...
    @property
    def script(self) -> Path | None: ...
    @property
    def requirements(self) -> list[str]: ...


class PackagingError(VertexdistError):
    """The trainer could not be packaged or installed."""


@dataclass(frozen=True)
class BuiltPackage:
    path: Path
    dist_name: str
    version: str
    digest: str

    @property
    def filename(self) -> str:
        return f"{self.dist_name}-{self.version}.tar.gz"


def package_uri(staging_bucket: str, pkg: BuiltPackage) -> str:
    """Where the sdist lives in the staging bucket; the digest in the path makes it content-addressed."""
    return f"{staging_bucket.rstrip('/')}/vertexdist/packages/{pkg.digest[:16]}/{pkg.filename}"


def _setup_py(dist_name: str, version: str, requirements: Sequence[str]) -> str:
    return (
        "from setuptools import find_packages, setup\n\n"
        "setup(\n"
        f"    name={dist_name!r},\n"
        f"    version={version!r},\n"
        "    packages=find_packages(),\n"
        "    package_data={'': ['*', '**/*']},\n"
        f"    install_requires={list(requirements)!r},\n"
        ")\n"
    )


def _pkg_info(dist_name: str, version: str, requirements: Sequence[str]) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {dist_name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {req}" for req in requirements]
    return "\n".join(lines) + "\n"


def _skipped_dir(folder: Path, name: str) -> bool:
    return (
        always_excluded_dir(name)
        or name.endswith(_BUILD_LEFTOVER_DIR_SUFFIX)
        or (folder / VENV_MARKER).exists()
    )


def _skipped_file(name: str) -> bool:
    return always_excluded_file(name) is not None or name.endswith(_BUILD_LEFTOVER_FILE_SUFFIX)


def _resolve_link(link: Path, real_root: Path) -> Path:
    """Where a symlink inside the package leads; an error naming it when that is nowhere or outside."""
    written = os.readlink(link)
    try:
        target = Path(os.path.realpath(link, strict=True))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PackagingError(
                f"trainer package: {link} -> {written} is a symlink loop",
                hint="remove the link or point it at a file inside the package",
            ) from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise PackagingError(
                f"trainer package: {link} -> {written} is a dangling symlink (its target does not exist)",
                hint="remove the link or point it at a file inside the package",
            ) from None
        raise PackagingError(f"trainer package: {link} -> {written} cannot be read: {exc.strerror}") from None
    if not target.is_relative_to(real_root):
        raise PackagingError(
            f"trainer package: {link} -> {written} points outside the package folder, to {target}",
            hint="the package ships only its own files: copy the file into the package, or remove the link",
        )
    return target


def _package_files(root: Path) -> list[tuple[str, bytes]]:
    """(relative posix path, content) of every file a package folder ships, in a stable order.

    The build context's exclusions apply (`vertexdist.container.ignore`: VCS folders, virtualenvs,
    caches, `.env` and key files). A symlink is shipped as the file or folder it points to, which must
    be inside the package; one pointing outside, nowhere, or into a loop is an error naming it.
    """
    real_root = root.resolve()
    files: list[tuple[str, bytes]] = []
    _walk_package(root, root.name, real_root, (real_root,), files)
    return files


def _walk_package(
    folder: Path, rel: str, real_root: Path, ancestors: tuple[Path, ...], files: list[tuple[str, bytes]]
) -> None:
    with os.scandir(folder) as found:
        entries = sorted(found, key=lambda e: e.name)
    for entry in entries:
        rel_path = f"{rel}/{entry.name}"
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False) or entry.is_file(follow_symlinks=False):
            target = path
        elif entry.is_symlink():
            if always_excluded_dir(entry.name) or _skipped_file(entry.name):
                continue  # left out by its name: where it leads does not matter
            target = _resolve_link(path, real_root)
        else:
            continue  # sockets, fifos, devices: never package content
        if target.is_dir():
            if _skipped_dir(target, entry.name):
                continue
            real = target.resolve()
            if real in ancestors:
                raise PackagingError(
                    f"trainer package: {path} -> {os.readlink(path)} is a symlink loop"
                    " (it leads back to a folder that holds it)",
                    hint="remove the link",
                )
            _walk_package(target, rel_path, real_root, (*ancestors, real), files)
        elif target.is_file():
            if _skipped_file(entry.name) or _skipped_file(target.name):
                continue  # a link named harmlessly to a secret is still the secret
            files.append((rel_path, target.read_bytes()))


def _sdist_members(trainer: TrainerSource) -> tuple[str, list[tuple[str, bytes]]]:
    requirements = list(trainer.requirements)
    if trainer.package is not None:
        root = Path(trainer.package)
        if not (root / "__init__.py").is_file():
            raise PackagingError(
                f"{root}: not a Python package (no __init__.py)",
                hint="point trainer.package at a folder that holds __init__.py, or use trainer.script",
            )
        dist_name = root.name
        files = _package_files(root)
    elif trainer.script is not None:
        script = Path(trainer.script)
        if not script.is_file():
            raise PackagingError(f"{script}: trainer script not found", hint="check trainer.script")
        dist_name = SCRIPT_PACKAGE
        files = [
            (f"{SCRIPT_PACKAGE}/__init__.py", b""),
            (f"{SCRIPT_PACKAGE}/task.py", script.read_bytes()),
            # the user's own file name, by which the health watcher names its frames (not task.py)
            (f"{SCRIPT_PACKAGE}/{SOURCE_FILE}", script.name.encode()),
        ]
    else:
        raise PackagingError("the trainer has neither a package nor a script", hint="set trainer.package")
    if dist_name == LAUNCHER_PACKAGE:
        raise PackagingError(
            f"the trainer package is named {LAUNCHER_PACKAGE}, the name of the launcher every package ships",
            hint="rename the package folder",
        )
    files += _package_files(LAUNCHER_DIR)
    files.append(("setup.py", _setup_py(dist_name, DEFAULT_VERSION, requirements).encode()))
    files.append(("PKG-INFO", _pkg_info(dist_name, DEFAULT_VERSION, requirements).encode()))
    return dist_name, sorted(files)


def _tar_gz(prefix: str, members: Iterable[tuple[str, bytes]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel, data in members:
            info = tarfile.TarInfo(f"{prefix}/{rel}")
            info.size = len(data)
            info.mtime = _FIXED_MTIME
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sdist_bytes(trainer: TrainerSource) -> tuple[BuiltPackage, bytes]:
    """The trainer's sdist in memory (not written: `path` is empty); identical sources, identical bytes."""
    dist_name, members = _sdist_members(trainer)
    data = _tar_gz(f"{dist_name}-{DEFAULT_VERSION}", members)
    digest = hashlib.sha256(data).hexdigest()
    return BuiltPackage(path=Path(), dist_name=dist_name, version=DEFAULT_VERSION, digest=digest), data


def planned_package_uri(trainer: TrainerSource, staging_bucket: str) -> str:
    """The URI `submit` uploads the trainer to, computed without writing anything (render, dry-run)."""
    return package_uri(staging_bucket, sdist_bytes(trainer)[0])


def build_sdist(trainer: TrainerSource, out_dir: Path) -> BuiltPackage:
    """Write the trainer's sdist under `out_dir/<digest[:16]>/`; an identical file already there is kept."""
    pkg, data = sdist_bytes(trainer)
    path = Path(out_dir) / pkg.digest[:16] / pkg.filename
    if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != pkg.digest:
        _write_atomic(path, data)
    return BuiltPackage(path=path, dist_name=pkg.dist_name, version=pkg.version, digest=pkg.digest)


def file_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def install_dir(sdist: Path, cache_dir: Path) -> Path:
    """The folder `install_package` puts `sdist` in: keyed by its digest, so it is known before installing."""
    return Path(cache_dir) / file_digest(sdist)[:16]


def install_package(sdist: Path, cache_dir: Path) -> Path:
    """pip-install `sdist` (without dependencies) into a folder keyed by its digest; reuse it when present.

    The returned folder goes on PYTHONPATH, so a replica imports the installed copy, not the source tree:
    a file left out of the package fails locally exactly as it would on Vertex.
    """
    target = install_dir(sdist, cache_dir)
    marker = target / ".vertexdist-installed"
    if marker.is_file():
        return target
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=cache_dir, prefix=".install-"))
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "--no-index",
                "--disable-pip-version-check",
                "--no-compile",
                "--target",
                str(staging),
                str(sdist),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PIP_NO_INPUT": "1"},
        )
        if result.returncode != 0:
            tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-8:])
            raise PackagingError(
                f"installing {Path(sdist).name} failed:\n{tail}",
                hint="the same install runs on Vertex; fix the package (setup, files) and try again",
            )
        (staging / marker.name).write_text(str(sdist) + "\n")
        try:
            os.replace(staging, target)
        except OSError:
            # Another run installed the same digest first; theirs is identical.
            if not marker.is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
