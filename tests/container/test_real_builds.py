"""Real builds: the docker CLI with a daemon, and Cloud Build with credentials. Neither exists on the
development machine, so these skip there; nothing here stands in for a builder."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from vertexdist.container.context import collect_context, content_hash, image_tag, write_context_tar
from vertexdist.container.docker import DockerCliRunner, docker_daemon_answers
from vertexdist.container.ensure import ensure_image
from vertexdist.spec import load_template

needs_docker = pytest.mark.skipif(
    not docker_daemon_answers(),
    reason="no Docker daemon answers on this machine (the docker CLI alone cannot build)",
)
LIVE_TEMPLATE = os.environ.get("VERTEXDIST_TEST_BUILD_TEMPLATE")


@pytest.mark.docker
@needs_docker
def test_docker_builds_the_context_tarball(
    tmp_path: Path, write_files: Callable[[Path, Mapping[str, str]], Path]
) -> None:
    root = write_files(
        tmp_path / "ctx",
        {"Dockerfile": "FROM scratch\nCOPY app/ /app/\n", "app/task.py": "print('hi')\n", "notes.txt": "x"},
    )
    (root / ".dockerignore").write_text("notes.txt\n")
    context = collect_context(root, root / "Dockerfile")
    tar_path = tmp_path / "ctx.tar.gz"
    with open(tar_path, "wb") as out:
        digest = write_context_tar(context, out)
    assert digest == content_hash(context)
    uri = f"vertexdist-test/ctx:{image_tag(digest)}"
    DockerCliRunner(log=lambda _line: None).build(tar_path, uri, context.dockerfile, {})
    try:
        created = subprocess.run(["docker", "image", "inspect", uri], capture_output=True, timeout=60)
        assert created.returncode == 0
    finally:
        subprocess.run(["docker", "image", "rm", "-f", uri], capture_output=True, timeout=60)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.skipif(
    LIVE_TEMPLATE is None,
    reason="no Cloud Build here: set VERTEXDIST_TEST_BUILD_TEMPLATE to a template with `build` "
    "(and Google credentials) to run a real build",
)
def test_cloud_build_builds_once_then_reuses_the_tag() -> None:
    assert LIVE_TEMPLATE is not None
    template = load_template(LIVE_TEMPLATE)
    first = ensure_image(template)
    second = ensure_image(template)
    assert second.image_uri == first.image_uri and not second.built
