"""Issue 34: the template's `model:` section — what `validate` says about it and its pure render into the
TrainingPipeline's `modelToUpload`, `parentModel` and `modelId`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vertexdist.render import render_request
from vertexdist.render.pipeline import render_model_upload
from vertexdist.spec import JobTemplate, check_template
from vertexdist.spec.model_upload import serving_image_problem

from .conftest import BASE

SERVING = "us-docker.pkg.dev/vertex-ai/prediction/pytorch-gpu.2-4:latest"


def template(tmp_path: Path | None = None, script: str | None = None, **model: Any) -> JobTemplate:
    data: dict[str, Any] = {
        **BASE,
        "labels": {"team": "vision"},
        "model": {"serving_container_image_uri": SERVING, **model},
    }
    if tmp_path is not None and script is not None:
        (tmp_path / "train.py").write_text(script)
        data["trainer"] = {"script": str(tmp_path / "train.py")}
    return JobTemplate.model_validate(data, context={"skip_rules": True})


def findings(t: JobTemplate) -> list[tuple[str, str, str]]:
    return [(f.path, f.severity, f.message) for f in check_template(t) if f.path.startswith("model")]


def test_the_defaults_render_as_custom_training_job_run_sends_them() -> None:
    assert render_model_upload(template()) == {
        "modelToUpload": {
            "displayName": "test-job-model",  # CustomTrainingJob: <display_name>-model
            "containerSpec": {"imageUri": SERVING},
            "labels": {"team": "vision"},  # the job's labels, as the SDK copies them
            "versionAliases": ["default"],
        }
    }


def test_every_field_renders() -> None:
    rendered = render_model_upload(
        template(
            display_name="chapter",
            description="d",
            labels={"stage": "dev"},
            parent_model="123",
            version_aliases=["candidate"],
            is_default_version=False,
            version_description="v",
            serving_container_predict_route="/predict",
            serving_container_health_route="/health",
            serving_container_ports=[8080],
            serving_container_command=["serve"],
            serving_container_args=["--x"],
            serving_container_environment_variables={"A": "1"},
        )
    )
    assert rendered == {
        "modelToUpload": {
            "displayName": "chapter",
            "containerSpec": {
                "imageUri": SERVING,
                "command": ["serve"],
                "args": ["--x"],
                "env": [{"name": "A", "value": "1"}],
                "ports": [{"containerPort": 8080}],
                "predictRoute": "/predict",
                "healthRoute": "/health",
            },
            "labels": {"stage": "dev"},
            "versionAliases": ["candidate"],  # not the default version: no `default` alias
            "description": "d",
            "versionDescription": "v",
        },
        "parentModel": "projects/vertexdist-demo/locations/us-central1/models/123",
    }


def test_no_section_renders_nothing_and_the_request_is_unchanged() -> None:
    plain = JobTemplate.model_validate(BASE, context={"skip_rules": True})
    assert render_model_upload(plain) == {}
    assert "modelToUpload" not in render_request(plain)["trainingPipeline"]


def test_the_request_parses_into_the_sdk_request_with_its_model() -> None:
    from google.cloud import aiplatform_v1

    request = render_request(template(model_id="my-model", serving_container_ports=[7080]))
    parsed = aiplatform_v1.CreateTrainingPipelineRequest.from_json(
        json.dumps(request), ignore_unknown_fields=False
    )
    assert parsed.training_pipeline.model_to_upload.container_spec.ports[0].container_port == 7080
    assert parsed.training_pipeline.model_id == "my-model"


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        (SERVING, None),
        ("europe-docker.pkg.dev/my-proj/serving/model@sha256:" + "a" * 64, None),
        ("gcr.io/my-proj/server:1.0", None),
        ("us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest", "training image"),
        ("us-docker.pkg.dev/vertex-ai/prediction/Bad Name", "not a Vertex prebuilt prediction image"),
        ("Not An Image!", "not an image reference"),
        # Vertex pulls serving images from Artifact Registry or Container Registry, not Docker Hub (issue 42)
        ("pytorch/torchserve:0.12.0-cpu", "Docker Hub"),
        ("nginx", "Docker Hub"),
        ("docker.io/library/nginx:1.27", "Docker Hub"),
        ("localhost:5000/server:1", None),
    ],
)
def test_serving_image(uri: str, problem: str | None) -> None:
    found = serving_image_problem(uri)
    assert (found is None) if problem is None else (found is not None and problem in found[0])


def test_validate_names_each_bad_field() -> None:
    bad = template(
        serving_container_image_uri="us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-9:latest",
        version_aliases=["default", "9lives"],
        parent_model="projects/p/locations/l/datasets/1",
        serving_container_ports=[70000],
    )
    paths = [(path, severity) for path, severity, _ in findings(bad)]
    assert ("model.serving_container_image_uri", "error") in paths
    assert paths.count(("model.version_aliases", "error")) == 2
    assert ("model.parent_model", "error") in paths
    assert ("model.serving_container_ports", "error") in paths


def test_a_trainer_that_never_writes_aip_model_dir_is_warned_about(tmp_path: Path) -> None:
    silent = template(tmp_path, "print('training')\n")
    assert [(p, s) for p, s, m in findings(silent) if "AIP_MODEL_DIR" in m] == [("model", "warning")]
    saves = template(tmp_path, "import os\nopen(os.environ['AIP_MODEL_DIR'] + '/m', 'w')\n")
    assert findings(saves) == []


def test_a_local_run_says_what_it_would_register_and_fails_on_an_empty_model_folder(tmp_path: Path) -> None:
    from vertexdist.jobs.registered_model import local_registration

    t = template(parent_model="42", version_aliases=["candidate"])
    out = tmp_path / "out"
    lines, problem = local_registration(t, "gs://b/out/job-1", str(out))
    assert problem is not None and "wrote nothing to its model folder" in problem
    (out / "model").mkdir(parents=True)
    (out / "model" / "weights.bin").write_bytes(b"w")
    lines, problem = local_registration(t, "gs://b/out/job-1", str(out))
    assert problem is None
    text = "\n".join(lines)
    assert "a new version of projects/vertexdist-demo/locations/us-central1/models/42" in text
    assert "from gs://b/out/job-1/model (1 file in" in text and SERVING in text
