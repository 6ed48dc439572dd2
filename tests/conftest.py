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
