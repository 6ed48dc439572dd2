"""Fixtures shared across test folders: the repository root, file trees, and a template with `build`
beside a small build context (used by the image-building tests and the local backend's host runs)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
STAGING_BUCKET = "vd-staging"


def write_tree(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """Create `files` (relative path -> content) under `root`."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Callable[[Mapping[str, str | bytes]], Path]:
    def make(files: Mapping[str, str | bytes]) -> Path:
        return write_tree(tmp_path / "ctx", files)

    return make


TEMPLATE = """\
display_name: built-job
project: vertexdist-demo
location: us-central1
staging_bucket: gs://{bucket}/staging
machine_type: n1-standard-4
replica_count: 2
build:
{build}
"""


def template_text(build: str, bucket: str = STAGING_BUCKET) -> str:
    return TEMPLATE.format(bucket=bucket, build=textwrap.indent(textwrap.dedent(build).strip("\n"), "  "))


@pytest.fixture
def built_template(tmp_path: Path) -> Callable[..., Path]:
    """A template file beside a small build context (`ctx/`) with a Dockerfile and a package."""

    def make(build: str | None = None, files: Mapping[str, str | bytes] | None = None) -> Path:
        write_tree(
            tmp_path / "ctx",
            files
            or {
                "Dockerfile": "FROM python:3.11-slim\nCOPY app/ /app/app/\n"
                'ENTRYPOINT ["python", "-m", "app.task"]\n',
                "app/__init__.py": "",
                "app/task.py": "print('hello from app.task')\n",
            },
        )
        path = tmp_path / "job.yaml"
        path.write_text(
            template_text(
                build
                or """
                context: ctx
                dockerfile: ctx/Dockerfile
                repository: us-central1-docker.pkg.dev/vertexdist-demo/trainers
                """
            )
        )
        return path

    return make


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture
def write_files() -> Callable[[Path, Mapping[str, str | bytes]], Path]:
    return write_tree


def _wheel(out_dir: Path, name: str, version: str, files: Mapping[str, str]) -> Path:
    """A minimal pure-Python wheel, written by hand (no build backend, no network)."""
    import base64
    import hashlib
    import zipfile

    info = f"{name}-{version}.dist-info"
    members = dict(files)
    members[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    members[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: vertexdist-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = []
    for rel, text in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{rel},sha256={digest},{len(text.encode())}")
    members[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = out_dir / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for rel, text in members.items():
            archive.writestr(rel, text)
    return path


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with one tiny requirement, `vdreqdemo` (VALUE = 42), for offline pip (`--find-links`)."""
    folder = tmp_path_factory.mktemp("wheelhouse")
    _wheel(folder, "vdreqdemo", "1.0", {"vdreqdemo/__init__.py": "VALUE = 42\n"})
    return folder


@pytest.fixture
def offline_pip(wheelhouse: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip in jobs started from this process installs from `wheelhouse` only, and builds sdists with the
    setuptools already here (no build isolation, which would fetch setuptools from an index)."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheelhouse))
    monkeypatch.setenv("PIP_NO_BUILD_ISOLATION", "0")
    return wheelhouse


@pytest.fixture(scope="session")
def pip_freeze() -> Callable[[], str]:
    """`pip freeze --all` of the interpreter vertexdist runs in: a job that changes it changed the host."""
    import subprocess
    import sys

    def freeze() -> str:
        argv = [sys.executable, "-m", "pip", "freeze", "--all"]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

    return freeze
