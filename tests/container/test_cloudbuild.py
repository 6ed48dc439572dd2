"""cloudbuild.yaml and the Build request, checked against google-cloud-build's own messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.cloud.devtools import cloudbuild_v1

from vertexdist.container.cloudbuild import (
    BUNDLED_CONFIG,
    DOCKER_BUILD_STEP,
    IMAGE_STEP_IDS,
    build_request,
    config_path_for,
    load_config,
    validate_build,
    validate_request,
)
from vertexdist.errors import VertexdistError


@pytest.fixture
def repo_config(repo_root: Path) -> dict[str, Any]:
    return load_config(repo_root / "cloudbuild.yaml")


def steps_by_id(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {step["id"]: step for step in config["steps"]}


@pytest.mark.parametrize("name", ["cloudbuild.yaml", "bundled"])
def test_configs_load_into_the_build_message_with_unknown_fields_rejected(repo_root: Path, name: str) -> None:
    path = BUNDLED_CONFIG if name == "bundled" else repo_root / name
    config = load_config(path)
    build = cloudbuild_v1.Build.from_json(json.dumps(config), ignore_unknown_fields=False)
    assert [s.id for s in build.steps] == [s["id"] for s in config["steps"]]
    assert build.options.automap_substitutions
    assert build.options.substitution_option == cloudbuild_v1.BuildOptions.SubstitutionOption.ALLOW_LOOSE


def test_an_unknown_field_is_rejected(repo_config: dict[str, Any]) -> None:
    repo_config["steps"][0]["waitfor"] = ["-"]  # a typo of waitFor
    with pytest.raises(VertexdistError, match="waitfor"):
        validate_build(repo_config)


def test_pipeline_validates_tests_builds_with_cache_tags_pushes_and_may_submit(
    repo_config: dict[str, Any],
) -> None:
    steps = steps_by_id(repo_config)
    assert list(steps) == [
        "content-tag",
        "cache-pull",
        "install",
        "validate",
        "unit-tests",
        *IMAGE_STEP_IDS[2:],
        "submit",
    ]
    assert "vertexdist validate --format github job_templates/" in steps["validate"]["script"]
    assert "pytest" in steps["unit-tests"]["script"]
    build_args = steps[DOCKER_BUILD_STEP]["args"]
    cache_image = "${_REGION}-docker.pkg.dev/${PROJECT_ID}/${_REPOSITORY}/${_IMAGE}:cache"
    assert build_args[build_args.index("--cache-from") + 1] == cache_image
    assert {"cache-pull", "validate", "unit-tests"} <= set(steps[DOCKER_BUILD_STEP]["waitFor"])
    push = steps["tag-push"]["script"]
    assert "COMMIT_SHA" in push and ".vertexdist/build/tag" in push and "docker push" in push
    assert 'echo "${_TAG}"' in steps["content-tag"]["script"]
    assert "_SUBMIT_TEMPLATE" in steps["submit"]["script"]
    assert {"_REGION", "_REPOSITORY", "_IMAGE", "_TAG", "_SUBMIT_TEMPLATE"} <= set(
        repo_config["substitutions"]
    )
    assert repo_config["substitutions"]["_SUBMIT_TEMPLATE"] == ""


def test_bundled_image_pipeline_has_the_same_image_steps(repo_config: dict[str, Any]) -> None:
    def comparable(step: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in step.items() if k != "waitFor"}

    ours = steps_by_id(repo_config)
    bundled = steps_by_id(load_config(BUNDLED_CONFIG))
    assert list(bundled) == list(IMAGE_STEP_IDS)
    assert {k: comparable(v) for k, v in bundled.items()} == {k: comparable(ours[k]) for k in IMAGE_STEP_IDS}


def test_request_carries_source_substitutions_build_args_and_logs_bucket(repo_config: dict[str, Any]) -> None:
    request = build_request(
        repo_config,
        project_id="vertexdist-demo",
        source_bucket="vd-staging",
        source_object="staging/vertexdist/build-contexts/abc.tar.gz",
        substitutions={"_REGION": "europe-west4", "_TAG": "ctx-123", "_UNDECLARED": "x"},
        build_args={"BASE_IMAGE": "python:3.11", "PIP_REQUIREMENTS": "pandas==2.2.2 pyarrow"},
        logs_bucket="gs://vd-staging/staging/vertexdist/build-logs",
        tags=("vertexdist", "ctx-123"),
    )
    message = validate_request(request)
    assert message.project_id == "vertexdist-demo"
    build = message.build
    assert build.source.storage_source.bucket == "vd-staging"
    assert build.source.storage_source.object_ == "staging/vertexdist/build-contexts/abc.tar.gz"
    assert build.substitutions["_REGION"] == "europe-west4"
    assert build.substitutions["_TAG"] == "ctx-123"
    assert build.substitutions["_IMAGE"] == "vertexdist-trainer"  # the config's default stays
    assert "_UNDECLARED" not in build.substitutions
    assert build.logs_bucket == "gs://vd-staging/staging/vertexdist/build-logs"
    assert list(build.tags) == ["vertexdist", "ctx-123"]
    docker_args = list(next(s for s in build.steps if s.id == DOCKER_BUILD_STEP).args)
    assert docker_args[:5] == [
        "build",
        "--build-arg",
        "BASE_IMAGE=python:3.11",
        "--build-arg",
        "PIP_REQUIREMENTS=pandas==2.2.2 pyarrow",
    ]
    assert docker_args[-1] == "."
    # The config itself is untouched (the request is built on a copy).
    assert "--build-arg" not in steps_by_id(repo_config)[DOCKER_BUILD_STEP]["args"]


def test_build_args_need_a_docker_build_step() -> None:
    config = {"steps": [{"id": "other", "name": "bash", "script": "true"}]}
    with pytest.raises(VertexdistError, match="docker-build"):
        build_request(
            config,
            project_id="p",
            source_bucket="b",
            source_object="o",
            substitutions={},
            build_args={"A": "1"},
        )


def test_a_context_with_its_own_cloudbuild_yaml_uses_it(tmp_path: Path, repo_root: Path) -> None:
    assert config_path_for(tmp_path) == BUNDLED_CONFIG
    assert config_path_for(repo_root) == repo_root / "cloudbuild.yaml"


def test_a_config_without_steps_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cloudbuild.yaml"
    path.write_text("images: [x]\n")
    with pytest.raises(VertexdistError, match="steps"):
        load_config(path)


def test_the_tag_computed_inside_cloud_build_matches_the_local_one(repo_root: Path, tmp_path: Path) -> None:
    """A trigger leaves _TAG empty: the content-tag step hashes /workspace with the vertexdist source in it.
    Unpacked from the uploaded tarball, and after the install and test steps wrote their files there, the
    workspace must still give the tag computed locally, or `submit` in the pipeline would rebuild."""
    import io
    import subprocess
    import sys
    import tarfile

    from vertexdist.container.context import collect_context, content_hash, image_tag, write_context_tar

    context = collect_context(repo_root, repo_root / "Dockerfile")
    local_tag = image_tag(content_hash(context))
    tarball = io.BytesIO()
    write_context_tar(context, tarball)
    workspace = tmp_path / "workspace"
    with tarfile.open(fileobj=io.BytesIO(tarball.getvalue()), mode="r:gz") as tar:
        tar.extractall(workspace, filter="tar")
    # What the later steps leave behind: a venv under .vertexdist, egg-info, caches.
    for rel, content in {
        ".vertexdist/venv/pyvenv.cfg": "home = /usr/local/bin\n",
        ".vertexdist/build/tag": local_tag + "\n",
        "vertexdist.egg-info/PKG-INFO": "Name: vertexdist\n",
        "vertexdist/__pycache__/x.cpython-311.pyc": "",
        ".pytest_cache/README.md": "",
    }.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(content)
    result = subprocess.run(
        # -S: no site-packages, as on the bare python image the step runs on (standard library only).
        [sys.executable, "-S", "-m", "vertexdist.container", "tag", "--dockerfile", "Dockerfile", "."],
        cwd=workspace,
        env={"PYTHONPATH": ".", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == local_tag
