"""`training_step` of a template: the emitted step equals `render --request`; on the emulator it runs as a
real CustomJob (its ranks), fed by an earlier step's output, and `gcp_resources` names that job."""

# No `from __future__ import annotations`: kfp reads the components' annotations as types.
import json
from pathlib import Path
from typing import Any

import yaml
from kfp import compiler, dsl

from tests.pipelines.conftest import ROOT
from vertexdist.pipelines import custom_job_payload, training_step
from vertexdist.pipelines.stage import stage_package
from vertexdist.render import render_request
from vertexdist.render.custom_job import with_job_folder
from vertexdist.spec.loader import load_template

TEMPLATE = Path(__file__).resolve().parents[2] / "job_templates" / "cpu-small.yaml"


@dsl.component
def prepare() -> str:
    return "--data=synthetic"


@dsl.component
def evaluate(gcp_resources: str) -> str:
    import json

    return json.loads(gcp_resources)["resources"][0]["resourceUri"].split("/v1/", 1)[1]


@dsl.pipeline(name="train-flow")
def train_flow() -> None:
    data = prepare()
    train = training_step(
        TEMPLATE, args=["--epochs=1", "--batch-size=32", data.output], display_name="cpu-small"
    )
    evaluate(gcp_resources=train.outputs["gcp_resources"])


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
    assert payload == custom_job_payload(TEMPLATE)


def test_a_training_step_runs_as_an_emulator_custom_job(
    aip: Any, pipeline_emulator: Any, tmp_path: Path
) -> None:
    from google.cloud import storage

    stage_package(TEMPLATE, storage.Client(project="pipe-proj"), create_bucket=True)
    path = tmp_path / "train.yaml"
    compiler.Compiler().compile(train_flow, str(path))
    job = aip.PipelineJob(display_name="train-flow", template_path=str(path), pipeline_root=ROOT)
    job.submit()
    job.wait()
    assert job.state.name == "PIPELINE_STATE_SUCCEEDED", job.gca_resource.error
    tasks = {t.task_name: t for t in job.task_details}
    custom_job = tasks["cpu-small"].executor_detail.custom_job_detail.job
    assert tasks["evaluate"].execution.metadata["output:Output"] == custom_job
    ran = pipeline_emulator.store.get(custom_job)
    assert ran["state"] == "JOB_STATE_SUCCEEDED"
    pools = ran["jobSpec"]["workerPoolSpecs"]
    assert pools[0]["pythonPackageSpec"]["args"] == ["--epochs=1", "--batch-size=32", "--data=synthetic"]
    assert set(pipeline_emulator.service.log_files(custom_job)) == {"workerpool0-0", "workerpool1-0"}
