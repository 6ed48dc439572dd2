"""`training_step` of a template: the emitted step equals `render --request`; on the emulator it runs as a
real CustomJob (its ranks), fed by an earlier step's output, and `gcp_resources` names that job."""

# No `from __future__ import annotations`: kfp reads the components' annotations as types.
import json
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from kfp import compiler, dsl
from kfp.dsl import Input, Model

from tests.pipelines.conftest import ROOT
from vertexdist.pipelines import custom_job_payload, model_upload_step, step_payload, training_step
from vertexdist.pipelines.stage import stage_package
from vertexdist.render import render_request
from vertexdist.render.custom_job import with_job_folder
from vertexdist.spec.loader import load_template

TEMPLATE = Path(__file__).resolve().parents[2] / "job_templates" / "cpu-small.yaml"


MODEL = {"serving_container_image_uri": "us-docker.pkg.dev/vertex-ai/prediction/pytorch-cpu.2-4:latest"}


@dsl.component
def prepare() -> str:
    return "--data=synthetic"


@dsl.component
def evaluate(model: Input[Model], gcp_resources: str) -> NamedTuple("Scores", loss=float, job=str):
    import json
    import os
    from collections import namedtuple

    with open(os.path.join(model.path, "model", "metrics.jsonl")) as handle:
        epochs = [line for line in map(json.loads, handle) if line.get("event") == "epoch"]
    job = json.loads(gcp_resources)["resources"][0]["resourceUri"].split("/v1/", 1)[1]
    return namedtuple("Scores", ["loss", "job"])(epochs[-1]["loss"], job)


@dsl.pipeline(name="train-flow")
def train_flow() -> None:
    data = prepare()
    train = training_step(
        TEMPLATE, args=["--epochs=1", "--batch-size=32", data.output], display_name="cpu-small"
    )
    scores = evaluate(model=train.outputs["model"], gcp_resources=train.outputs["gcp_resources"])
    with dsl.If(scores.outputs["loss"] < 1000.0):
        model_upload_step(train.outputs["model"], TEMPLATE, model={**MODEL, "display_name": "small"})
    with dsl.If(scores.outputs["loss"] < 0.0):
        model_upload_step(train.outputs["model"], TEMPLATE, model={**MODEL, "display_name": "never"})


def test_the_step_is_the_job_render_request_shows() -> None:
    from vertexdist.packaging import planned_package_uri

    loaded = load_template(TEMPLATE)
    rendered = render_request(loaded, package_uri=planned_package_uri(loaded.trainer, loaded.staging_bucket))
    expected = with_job_folder(rendered, "{{$.pipeline_task_uuid}}")["trainingPipeline"]
    payload = custom_job_payload(TEMPLATE)
    assert payload["job_spec"] == expected["trainingTaskInputs"]
    assert payload["display_name"] == expected["displayName"]


def test_compiled_step_runs_the_gcpc_launcher_with_that_payload(tmp_path: Path) -> None:
    @dsl.pipeline(name="one-step")
    def one_step() -> None:
        training_step(TEMPLATE)

    compiler.Compiler().compile(one_step, str(tmp_path / "p.yaml"))
    executor = yaml.safe_load((tmp_path / "p.yaml").read_text())["deploymentSpec"]["executors"]
    container = next(iter(executor.values()))["container"]
    assert container["command"][-1] == "google_cloud_pipeline_components.container.v1.custom_job.launcher"
    payload = json.loads(container["args"][container["args"].index("--payload") + 1])
    assert payload == step_payload(TEMPLATE)
    assert payload["job_spec"]["baseOutputDirectory"] == {
        "outputUriPrefix": "{{$.outputs.artifacts['model'].uri}}"
    }
    rest = {k: v for k, v in payload["job_spec"].items() if k != "baseOutputDirectory"}
    assert rest == {
        k: v for k, v in custom_job_payload(TEMPLATE)["job_spec"].items() if k != "baseOutputDirectory"
    }


def test_train_evaluate_and_register_then_a_cached_rerun(
    aip: Any, pipeline_emulator: Any, tmp_path: Path
) -> None:
    """The issue's pipeline: a lightweight step, cpu-small.yaml's job fed its output, an evaluation of the
    job's model, the model registered under a condition on the evaluation; then the same run again, every
    task cached and the result the same."""
    from google.cloud import storage

    stage_package(TEMPLATE, storage.Client(project="pipe-proj"), create_bucket=True)
    path = tmp_path / "train.yaml"
    compiler.Compiler().compile(train_flow, str(path))
    runs = []
    names = []
    for _ in range(2):
        job = aip.PipelineJob(display_name="train-flow", template_path=str(path), pipeline_root=ROOT)
        job.submit()
        job.wait()
        assert job.state.name == "PIPELINE_STATE_SUCCEEDED", job.gca_resource.error
        runs.append({t.task_name: t for t in job.task_details})
        names.append(job.resource_name)
    first, again = runs
    custom_job = first["cpu-small"].executor_detail.custom_job_detail.job
    ran = pipeline_emulator.store.get(custom_job)
    assert ran["state"] == "JOB_STATE_SUCCEEDED"
    pools = ran["jobSpec"]["workerPoolSpecs"]
    assert pools[0]["pythonPackageSpec"]["args"] == ["--epochs=1", "--batch-size=32", "--data=synthetic"]
    assert set(pipeline_emulator.service.log_files(custom_job)) == {"workerpool0-0", "workerpool1-0"}
    model_folder = first["cpu-small"].outputs["model"].artifacts[0].uri
    assert ran["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"] == model_folder
    scores = first["evaluate"].execution.metadata
    assert scores["output:job"] == custom_job and scores["output:loss"] < 1000.0
    from vertexdist.console.pipelines import custom_job_path  # the console's link to the step's job page

    link = custom_job_path(dict(first["cpu-small"].execution.metadata))
    assert link == f"vertex/{custom_job.split('/', 4)[4]}"
    uploaded = first["small-upload"].execution.metadata["model"]
    model = pipeline_emulator.models.get(uploaded)
    assert model["displayName"] == "small" and model["artifactUri"] == f"{model_folder}/model"
    assert model["containerSpec"]["imageUri"] == MODEL["serving_container_image_uri"]
    conditions = sorted(t.state.name for t in first.values() if t.task_name.startswith("condition-"))
    assert conditions == ["NOT_TRIGGERED", "SUCCEEDED"]
    assert "never-upload" not in first
    steps = ("prepare", "cpu-small", "evaluate", "small-upload")
    assert [again[n].state.name for n in steps] == ["SKIPPED"] * 4
    assert again["evaluate"].execution.metadata["output:loss"] == scores["output:loss"]
    assert (
        again["small-upload"].execution.metadata["output:gcp_resources"]
        == (first["small-upload"].execution.metadata["output:gcp_resources"])
    )
    assert len(pipeline_emulator.models.versions(uploaded.split("@")[0])) == 1  # not registered twice
    # `pipeline logs`' reader: the training task's lines are its CustomJob's (named in gcp_resources), from
    # both replicas, through the emulated Cloud Logging API.
    lines = _task_lines(pipeline_emulator, names[0], "cpu-small")
    assert any(line.startswith("cpu-small: ") for line in lines), lines[-5:]
    assert any(line.startswith("cpu-small/workerpool1-0: ") for line in lines), lines[-5:]


def _task_lines(emulator: Any, name: str, task: str) -> list[str]:
    from google.protobuf import json_format

    from vertexdist.backends.config import Target
    from vertexdist.jobs.pipeline_logs import PipelineLogs

    target = Target("pipe-proj", "us-central1", api_endpoint=emulator.vertex_endpoint, api_transport="rest")

    def get() -> dict[str, Any]:
        return dict(json_format.MessageToDict(aiplatform_job(name).gca_resource._pb))

    lines: list[str] = []
    PipelineLogs(target, get).show(lines.append, task=task)
    return lines


def aiplatform_job(name: str) -> Any:
    from google.cloud import aiplatform

    return aiplatform.PipelineJob.get(name)
