"""The template's `build` section (engineer A's models and rules), as `vertexdist build` relies on them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from vertexdist.errors import TemplateError
from vertexdist.render import render_job_spec
from vertexdist.spec import load_template

OK = "context: ctx\ndockerfile: ctx/Dockerfile\n"
REPO = "repository: us-central1-docker.pkg.dev/vertexdist-demo/t\n"


def test_paths_resolve_against_the_template_and_defaults_apply(
    built_template: Callable[..., Path], tmp_path: Path
) -> None:
    path = built_template(
        """
        context: ctx
        dockerfile: ctx/Dockerfile
        repository: us-central1-docker.pkg.dev/vertexdist-demo/trainers
        build_args: {EPOCHS: 3}
        """
    )
    build = load_template(path).build
    assert build is not None
    assert Path(build.context) == (tmp_path / "ctx").resolve()
    assert Path(build.dockerfile) == (tmp_path / "ctx/Dockerfile").resolve()
    assert build.image == "vertexdist-trainer"
    assert build.build_args == {"EPOCHS": "3"}


@pytest.mark.parametrize(
    ("build", "field", "words"),
    [
        (
            "context: missing\nrepository: us-central1-docker.pkg.dev/vertexdist-demo/trainers",
            "build.context",
            "does not exist",
        ),
        (
            "context: ctx\ndockerfile: nope/Dockerfile\n" + REPO,
            "build.dockerfile",
            "does not exist",
        ),
        (
            OK + "repository: gcr.io/vertexdist-demo/trainers",
            "build.repository",
            "not an Artifact Registry repository",
        ),
        (OK, "build.repository", ""),
        (
            OK + REPO + "image: Bad_Name",
            "build.image",
            "not an image name",
        ),
        (
            OK + REPO + "build_arg: {A: 1}",
            "build.build_arg",
            "",
        ),
        (
            OK + "repository: mars-1-docker.pkg.dev/vertexdist-demo/t",
            "build.repository",
            "not an Artifact Registry location",
        ),
    ],
    ids=[
        "no context",
        "no dockerfile",
        "not artifact registry",
        "no repository",
        "bad image",
        "unknown key",
        "bad region",
    ],
)
def test_bad_build_sections_are_reported_on_their_field(
    built_template: Callable[..., Path], build: str, field: str, words: str
) -> None:
    with pytest.raises(TemplateError) as info:
        load_template(built_template(build))
    problems = [p for p in info.value.problems if p.severity == "error"]
    assert any(p.path.startswith(field) and words in p.message for p in problems), [
        p.one_line() for p in problems
    ]


def test_render_runs_the_built_image_on_the_training_pools(built_template: Callable[..., Path]) -> None:
    template = load_template(built_template())
    uri = "us-central1-docker.pkg.dev/vertexdist-demo/trainers/vertexdist-trainer:ctx-0123456789abcdef0123"
    pools = render_job_spec(template, image_uri=uri)["workerPoolSpecs"]
    assert [p["containerSpec"]["imageUri"] for p in pools] == [uri, uri]
    assert all("pythonPackageSpec" not in p for p in pools)
