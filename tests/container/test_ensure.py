"""plan_build / ensure_image: the hash names the image, an existing tag is not rebuilt."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from vertexdist.container.cloudbuild import validate_request
from vertexdist.container.context import image_tag
from vertexdist.container.ensure import ensure_image, plan_build
from vertexdist.container.image import ImageRef
from vertexdist.errors import UsageError, VertexdistError
from vertexdist.spec import load_template


class RegistryWith:
    """The registry answer, injected (the real checkers are network edges)."""

    def __init__(self, *existing: str) -> None:
        self.existing = set(existing)
        self.asked: list[str] = []

    def exists(self, image: ImageRef) -> bool:
        self.asked.append(image.uri)
        return image.uri in self.existing


class MustNotRun:
    """A runner that fails the test if the decision was to build."""

    def upload(self, tar_path: Path, bucket: str, object_name: str) -> bool:
        raise AssertionError("uploaded although the image exists")

    def run(self, request: Mapping[str, Any]) -> Any:
        raise AssertionError("built although the image exists")

    def build_and_push(self, *args: Any) -> None:
        raise AssertionError("built although the image exists")


def test_plan_names_the_image_by_content_hash_and_prepares_a_valid_request(
    built_template: Callable[..., Path],
) -> None:
    plan = plan_build(load_template(built_template()))
    assert plan.image_uri == (
        "us-central1-docker.pkg.dev/vertexdist-demo/trainers/vertexdist-trainer:"
        + image_tag(plan.content_hash)
    )
    assert plan.context.paths() == ["Dockerfile", "app/__init__.py", "app/task.py"]
    assert plan.context_uri == f"gs://vd-staging/staging/vertexdist/build-contexts/{plan.content_hash}.tar.gz"
    build = validate_request(plan.request).build
    assert build.substitutions["_TAG"] == image_tag(plan.content_hash)
    assert build.substitutions["_REPOSITORY"] == "trainers"
    assert build.substitutions["_DOCKERFILE"] == "Dockerfile"
    assert (
        build.source.storage_source.object_ == f"staging/vertexdist/build-contexts/{plan.content_hash}.tar.gz"
    )
    assert build.logs_bucket == "gs://vd-staging/staging/vertexdist/build-logs"


def test_same_template_twice_gives_the_same_plan(built_template: Callable[..., Path]) -> None:
    path = built_template()
    assert plan_build(load_template(path)).request == plan_build(load_template(path)).request


def test_build_args_and_trainer_requirements_reach_the_docker_build(
    built_template: Callable[..., Path],
) -> None:
    path = built_template(
        """
        context: ctx
        dockerfile: ctx/Dockerfile
        repository: us-central1-docker.pkg.dev/vertexdist-demo/trainers
        build_args: {BASE_IMAGE: "python:3.11-slim", EPOCHS: 3}
        """
    )
    text = path.read_text() + "trainer:\n  requirements: [pandas==2.2.2, pyarrow]\n"
    path.write_text(text)
    plan = plan_build(load_template(path))
    assert plan.build_args == {
        "BASE_IMAGE": "python:3.11-slim",
        "EPOCHS": "3",
        "PIP_REQUIREMENTS": "pandas==2.2.2 pyarrow",
    }
    step = next(s for s in validate_request(plan.request).build.steps if s.id == "docker-build")
    assert "PIP_REQUIREMENTS=pandas==2.2.2 pyarrow" in list(step.args)


def test_an_existing_tag_means_no_upload_and_no_build(built_template: Callable[..., Path]) -> None:
    template = load_template(built_template())
    uri = plan_build(template).image_uri
    registry = RegistryWith(uri)
    lines: list[str] = []
    result = ensure_image(template, checker=registry, cloud=MustNotRun(), log=lines.append)
    assert (result.image_uri, result.built, result.uploaded) == (uri, False, False)
    assert registry.asked == [uri]
    assert lines == [f"{uri} exists; nothing to build"]


def test_a_changed_file_asks_for_a_new_tag(built_template: Callable[..., Path], tmp_path: Path) -> None:
    path = built_template()
    before = plan_build(load_template(path)).image_uri
    (tmp_path / "ctx/app/task.py").write_text("print('changed')\n")
    assert plan_build(load_template(path)).image_uri != before


def test_local_without_a_docker_daemon_says_so_before_anything_else(
    built_template: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    registry = RegistryWith()
    with pytest.raises(VertexdistError, match="no Docker daemon answers"):
        ensure_image(load_template(built_template()), local=True, checker=registry)
    assert registry.asked == []


def test_a_template_without_build_is_a_usage_error(built_template: Callable[..., Path]) -> None:
    path = built_template()
    text = path.read_text()
    path.write_text(text[: text.index("build:")])
    with pytest.raises(UsageError, match="no `build` section"):
        plan_build(load_template(path))
