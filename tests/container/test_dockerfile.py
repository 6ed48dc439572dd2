"""The repository's Dockerfile: hadolint-clean, and the layout the image needs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from vertexdist.local.host_container import parse_dockerfile


def test_hadolint_passes(hadolint: str, repo_root: Path) -> None:
    result = subprocess.run(
        [hadolint, "--no-color", "Dockerfile"], cwd=repo_root, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_catches_a_bad_dockerfile(hadolint: str, tmp_path: Path) -> None:
    """The check above can fail: an unpinned apt install without cleanup is reported."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu\nRUN apt-get update && apt-get install -y curl\n")
    result = subprocess.run([hadolint, "--no-color", str(bad)], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "DL3008" in result.stdout


@pytest.fixture
def dockerfile(repo_root: Path) -> str:
    return (repo_root / "Dockerfile").read_text()


def test_base_image_is_a_build_arg_defaulting_to_the_prebuilt_pytorch_gpu_image(dockerfile: str) -> None:
    lines = dockerfile.splitlines()
    arg = next(i for i, line in enumerate(lines) if line.startswith("ARG BASE_IMAGE="))
    assert lines[arg] == "ARG BASE_IMAGE=us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest"
    assert next(line for line in lines if line.startswith("FROM")) == "FROM ${BASE_IMAGE}"


def test_reduction_server_plugin_dependencies_before_code_non_root_and_entrypoint(dockerfile: str) -> None:
    assert "apt-get install -y --no-install-recommends google-reduction-server" in dockerfile
    assert "packages.cloud.google.com/apt google-fast-socket main" in dockerfile
    deps = dockerfile.index("pip install --no-cache-dir --requirement")
    code = dockerfile.index("COPY ${TRAINER_PACKAGE}/")
    user = dockerfile.index("\nUSER ")
    assert deps < code < user
    user_line = dockerfile[user + 1 :].splitlines()[0]
    assert user_line.split()[1] not in ("root", "0")
    process = parse_dockerfile(dockerfile)
    assert process.entrypoint == ("python", "-m", "trainer_pkg.task")
    assert process.env["PYTHONPATH"] == "/app"


def test_dockerignore_keeps_build_outputs_out(repo_root: Path) -> None:
    patterns = (repo_root / ".dockerignore").read_text().split()
    assert {"**/__pycache__", "**/*.egg-info", ".vertexdist"} <= set(patterns)


def test_the_image_carries_the_shipped_launcher_on_its_python_path(dockerfile: str, repo_root: Path) -> None:
    # `launcher: torchrun` container jobs run `python -m vertexdist_launcher`: /app is on PYTHONPATH.
    assert "COPY vertexdist/shipped/vertexdist_launcher/ /app/vertexdist_launcher/" in dockerfile
    assert (repo_root / "vertexdist/shipped/vertexdist_launcher/__main__.py").is_file()
    assert parse_dockerfile(dockerfile).env["PYTHONPATH"] == "/app"
