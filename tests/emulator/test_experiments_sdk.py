"""Vertex AI Experiments through the real SDK against the emulator's ML Metadata store and TensorBoard:
init(experiment=, experiment_tensorboard=), runs and what they log, Artifact and Execution with their
lineage, get_experiment_df, deleting runs and experiments with their TensorBoard runs, the TensorBoard
data calls, and the pure parts (the filter grammar, the store's nested names). The session emulator.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vertexdist.emulator import Emulator
from vertexdist.emulator.filters import parse_expression
from vertexdist.emulator.vertex.experiment_store import ExperimentStore
from vertexdist.wire.experiment_run import job_run, params_from_args

pytestmark = [pytest.mark.integration]

PARENT = "projects/test-proj/locations/us-central1"


@pytest.fixture(autouse=True)
def no_current_experiment() -> Iterator[None]:
    """Each test sets its own experiment; the SDK's tracker (experiment, run, global TensorBoard) is
    module state, and a global TensorBoard left set makes the next init ask for default credentials."""
    yield
    from google.cloud.aiplatform.metadata import metadata

    metadata._experiment_tracker.reset()
    metadata._experiment_tracker._global_tensorboard = None


@pytest.fixture
def tensorboard(aiplatform: Any) -> Any:
    return aiplatform.Tensorboard.create(display_name="experiments-tb")


def _client(emu: Emulator, name: str) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform_v1

    return getattr(aiplatform_v1, name)(
        transport="rest",
        client_options={"api_endpoint": emu.vertex_endpoint},
        credentials=AnonymousCredentials(),
    )


def test_a_run_logs_params_metrics_time_series_and_classification_metrics(
    aiplatform: Any, tensorboard: Any
) -> None:
    aiplatform.init(experiment="exp-logging", experiment_tensorboard=tensorboard)
    aiplatform.start_run("run-1")
    aiplatform.log_params({"lr": 0.1, "optimizer": "adam"})
    aiplatform.log_metrics({"accuracy": 0.9})
    for step in (1, 2, 3):
        aiplatform.log_time_series_metrics({"loss": 1.0 / step}, step=step)
    aiplatform.log_classification_metrics(
        labels=["cat", "dog"], matrix=[[3, 1], [0, 4]], fpr=[0.1, 0.5], tpr=[0.4, 0.9], threshold=[0.8, 0.2]
    )
    aiplatform.end_run()

    run = aiplatform.ExperimentRun("run-1", experiment="exp-logging")
    assert run.get_params() == {"lr": 0.1, "optimizer": "adam"}
    assert run.get_metrics() == {"accuracy": 0.9}
    assert run.get_state() == "COMPLETE"
    series = run.get_time_series_data_frame()
    assert list(series["step"]) == [1, 2, 3] and list(series["loss"]) == [1.0, 0.5, 1.0 / 3]
    (matrix,) = run.get_classification_metrics()
    assert matrix["labels"] == ["cat", "dog"] and matrix["matrix"] == [[3, 1], [0, 4]]
    assert (matrix["fpr"], matrix["tpr"], matrix["threshold"]) == ([0.1, 0.5], [0.4, 0.9], [0.8, 0.2])

    frame = aiplatform.get_experiment_df("exp-logging")
    (row,) = frame.to_dict("records")
    assert row["run_name"] == "run-1" and row["state"] == "COMPLETE"
    assert row["param.lr"] == 0.1 and row["param.optimizer"] == "adam" and row["metric.accuracy"] == 0.9
    assert row["time_series_metric.loss"] == pytest.approx(1.0 / 3)


def test_log_model_attaches_an_experiment_model_to_the_run(
    aiplatform: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No sklearn/xgboost/tensorflow in this environment: `save_model`'s framework part is replaced by the
    plain ExperimentModel artifact it would create; the rest of log_model is the SDK's."""
    from google.cloud.aiplatform.metadata import _models
    from google.cloud.aiplatform.metadata.schema.google.artifact_schema import ExperimentModel

    saved: list[Any] = []

    def save_model(model: Any, **_: Any) -> Any:
        saved.append(
            ExperimentModel(
                framework_name="sklearn",
                framework_version="1.5",
                model_file="model.pkl",
                model_class="sklearn.linear_model._base.LinearRegression",
                uri="gs://vd-staging/stage/model",
            ).create()
        )
        return saved[-1]

    monkeypatch.setattr(_models, "save_model", save_model)
    aiplatform.init(experiment="exp-model")
    with aiplatform.start_run("run-model") as run:
        aiplatform.log_model(object())
        (found,) = run.get_experiment_models()
    assert [found.resource_name] == [s.resource_name for s in saved]
    assert found.get_model_info()["model_class"] == "sklearn.linear_model._base.LinearRegression"
    assert found.uri == "gs://vd-staging/stage/model"


def test_artifacts_and_executions_with_their_lineage(aiplatform: Any, emu: Emulator) -> None:
    data = aiplatform.Artifact.create(
        schema_title="system.Dataset", uri="gs://vd-staging/data.csv", display_name="train-data"
    )
    assert aiplatform.Artifact.get(data.resource_name).uri == "gs://vd-staging/data.csv"
    assert aiplatform.Artifact.get_with_uri("gs://vd-staging/data.csv").resource_name == data.resource_name
    listed = aiplatform.Artifact.list(filter='schema_title="system.Dataset" AND display_name="train-data"')
    assert [a.resource_name for a in listed] == [data.resource_name]

    aiplatform.init(experiment="exp-lineage")
    with aiplatform.start_run("run-lineage") as run:
        with aiplatform.start_execution(
            schema_title="system.ContainerExecution", display_name="train"
        ) as exe:
            exe.assign_input_artifacts([data])
            model = aiplatform.Artifact.create(schema_title="system.Model", uri="gs://vd-staging/model")
            exe.assign_output_artifacts([model])
        assert [a.resource_name for a in exe.get_input_artifacts()] == [data.resource_name]
        assert [a.resource_name for a in exe.get_output_artifacts()] == [model.resource_name]
        assert [e.resource_name for e in run.get_executions()] == [exe.resource_name]
        assert {a.resource_name for a in run.get_artifacts()} >= {data.resource_name, model.resource_name}
    assert aiplatform.Execution.get(exe.resource_name).state.name == "COMPLETE"
    listed_exe = aiplatform.Execution.list(filter='display_name="train"')
    assert [e.resource_name for e in listed_exe] == [exe.resource_name]

    subgraph = _client(emu, "MetadataServiceClient").query_artifact_lineage_subgraph(
        artifact=model.resource_name
    )
    assert {a.name for a in subgraph.artifacts} == {data.resource_name, model.resource_name}
    assert [e.name for e in subgraph.executions] == [exe.resource_name]
    assert sorted(e.type_.name for e in subgraph.events) == ["INPUT", "OUTPUT"]


def test_deleting_runs_and_experiments_deletes_their_tensorboard_runs(
    aiplatform: Any, tensorboard: Any
) -> None:
    aiplatform.init(experiment="exp-delete", experiment_tensorboard=tensorboard)
    for name in ("run-a", "run-b"):
        with aiplatform.start_run(name):
            aiplatform.log_time_series_metrics({"loss": 1.0}, step=1)
    (tb_experiment,) = aiplatform.TensorboardExperiment.list(tensorboard_name=tensorboard.resource_name)
    assert len(aiplatform.TensorboardRun.list(tensorboard_experiment_name=tb_experiment.resource_name)) == 2

    aiplatform.ExperimentRun("run-a", experiment="exp-delete").delete(delete_backing_tensorboard_run=True)
    runs = aiplatform.TensorboardRun.list(tensorboard_experiment_name=tb_experiment.resource_name)
    assert [r.display_name for r in runs] == ["run-b"]
    assert [r.name for r in aiplatform.ExperimentRun.list(experiment="exp-delete")] == ["run-b"]

    aiplatform.Experiment("exp-delete").delete(delete_backing_tensorboard_runs=True)
    assert aiplatform.TensorboardRun.list(tensorboard_experiment_name=tb_experiment.resource_name) == []
    assert "exp-delete" not in [e.name for e in aiplatform.Experiment.list()]


def test_tensorboard_batch_create_write_and_read(aiplatform: Any, emu: Emulator, tensorboard: Any) -> None:
    from google.api_core import exceptions
    from google.cloud.aiplatform_v1 import types

    client = _client(emu, "TensorboardServiceClient")
    experiment = client.create_tensorboard_experiment(
        parent=tensorboard.resource_name, tensorboard_experiment={}, tensorboard_experiment_id="raw"
    )
    (run,) = client.batch_create_tensorboard_runs(
        parent=experiment.name,
        requests=[
            {"parent": experiment.name, "tensorboard_run": {"display_name": "r"}, "tensorboard_run_id": "r"}
        ],
    ).tensorboard_runs
    scalar = types.TensorboardTimeSeries.ValueType.SCALAR
    (series,) = client.batch_create_tensorboard_time_series(
        parent=experiment.name,
        requests=[
            {"parent": run.name, "tensorboard_time_series": {"display_name": "loss", "value_type": scalar}}
        ],
    ).tensorboard_time_series
    with pytest.raises(exceptions.Conflict):
        client.create_tensorboard_time_series(
            parent=run.name, tensorboard_time_series={"display_name": "loss", "value_type": scalar}
        )
    ident = series.name.rsplit("/", 1)[-1]
    points = [{"step": s, "scalar": {"value": s / 10}} for s in (1, 2)]
    client.write_tensorboard_experiment_data(
        tensorboard_experiment=experiment.name,
        write_run_data_requests=[
            {
                "tensorboard_run": run.name,
                "time_series_data": [
                    {"tensorboard_time_series_id": ident, "value_type": scalar, "values": points}
                ],
            }
        ],
    )
    read = client.read_tensorboard_time_series_data(tensorboard_time_series=series.name)
    assert [(p.step, p.scalar.value) for p in read.time_series_data.values] == [(1, 0.1), (2, 0.2)]
    exported = client.export_tensorboard_time_series_data(tensorboard_time_series=series.name)
    assert [p.step for p in exported.time_series_data_points] == [1, 2]
    with pytest.raises(exceptions.NotFound):
        client.get_tensorboard_run(name=f"{experiment.name}/runs/missing")


def test_a_bad_filter_is_a_400_naming_the_problem(aiplatform: Any) -> None:
    from google.api_core import exceptions

    with pytest.raises(exceptions.BadRequest, match="filter field 'colour'"):
        aiplatform.Artifact.list(filter='colour="red"')


JOB_SCRIPT = """\
import os, time
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter
uri = os.environ["AIP_TENSORBOARD_LOG_DIR"]
writer = EventFileWriter(os.environ.get("VERTEXDIST_GCS_ROOT", "/gcs") + "/" + uri[len("gs://"):])
for step in (1, 2):
    value = Summary.Value(tag="loss", simple_value=1 / (2 * step))
    writer.add_event(Event(step=step, wall_time=time.time(), summary=Summary(value=[value])))
writer.close()
"""


def test_a_job_with_an_experiment_is_logged_as_its_run(aiplatform: Any, tensorboard: Any) -> None:
    """CustomJob.run(experiment=, experiment_run=): the emulator logs the ended job as that run, with the
    trainer's arguments as params, its TensorBoard scalars as time series and their last values as metrics."""
    aiplatform.init(experiment="exp-job", experiment_tensorboard=tensorboard)
    aiplatform.ExperimentRun.create("job-run", experiment="exp-job")
    job = aiplatform.CustomJob(
        display_name="exp-job",
        worker_pool_specs=[
            {
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "container_spec": {
                    "image_uri": "example.com/trainer:latest",
                    "command": [sys.executable, "-c", JOB_SCRIPT],
                    "args": ["--lr=0.01", "--epochs", "2", "--fast"],
                },
            }
        ],
    )
    job.run(experiment="exp-job", experiment_run="job-run")
    run = aiplatform.ExperimentRun("job-run", experiment="exp-job")
    assert run.get_params() == {"lr": 0.01, "epochs": 2, "fast": "true"}
    assert run.get_metrics() == {"loss": 0.25}
    assert run.get_state() == "COMPLETE"
    series = run.get_time_series_data_frame()
    assert list(series["step"]) == [1, 2] and list(series["loss"]) == [0.5, 0.25]
    (row,) = aiplatform.get_experiment_df("exp-job").to_dict("records")
    assert row["param.lr"] == 0.01 and row["metric.loss"] == 0.25


def test_a_template_with_experiment_is_one_run_per_job(
    aiplatform: Any, cli: Any, write_template: Any
) -> None:
    """`experiment:` without `experiment_run`: submit renders jobSpec.experiment, and each job is a run
    of its own, named after its output folder, with the trainer's args and its loss time series."""
    path = write_template(JOB_SCRIPT, name="exp-template", extra="experiment:\n  name: exp-template\n")
    code, _, err = cli("submit", str(path))
    assert code == 0 and "SUCCEEDED" in err, err
    (run,) = aiplatform.ExperimentRun.list(experiment="exp-template")
    assert run.get_params() == {"epochs": 1} and run.get_metrics() == {"loss": 0.25}
    assert list(run.get_time_series_data_frame()["loss"]) == [0.5, 0.25]


def test_the_filter_grammar() -> None:
    def field(resource: dict[str, Any], name: str) -> Any:
        if name not in ("schema_title", "parent_contexts", "is_default"):
            raise ValueError(f"no field {name}")
        return resource.get(name)

    functions = {"in_context": lambda r, c: c in r.get("contexts", [])}
    run = {"schema_title": "system.ExperimentRun", "parent_contexts": ["e1"], "contexts": ["c"]}
    other = {"schema_title": "system.Run", "is_default": True}

    def matches(text: str) -> list[bool]:
        keep = parse_expression(text, field, functions)
        return [keep(run), keep(other)]

    assert matches('schema_title="system.ExperimentRun"') == [True, False]
    assert matches('(schema_title="system.Run" OR schema_title="x") AND NOT in_context("c")') == [False, True]
    assert matches('parent_contexts:"e0","e1"') == [True, False]
    assert matches('in_context("c") AND schema_title != "system.Run"') == [True, False]
    assert matches("is_default=true") == [False, True]
    for bad, problem in (
        ('colour="x"', "no field colour"),
        ('schema_title="x" AND', "expected word"),
        ('nope("x")', "function 'nope'"),
        ('(schema_title="x"', "expected \\)"),
    ):
        with pytest.raises(ValueError, match=problem):
            parse_expression(bad, field, functions)


def test_the_store_keeps_nested_names_apart_across_a_restart(tmp_path: Path) -> None:
    store = ExperimentStore(tmp_path)
    for experiment in ("e1", "e2"):
        store.insert(
            {"name": f"{PARENT}/tensorboards/1/experiments/{experiment}/runs/run-1", "createTime": "t"}
        )
    again = ExperimentStore(tmp_path)
    assert sorted(again.names()) == sorted(store.names()) and len(again.names()) == 2
    assert len(again.children(f"{PARENT}/tensorboards/1/experiments/e1", "runs")) == 1


def test_a_jobs_params_and_run_name_come_from_its_spec() -> None:
    args = ["--lr=0.1", "--epochs", "3", "data.csv", "--fast", "--name=a-b", "--lr=1e-3"]
    assert params_from_args(args) == {
        "lr": 1e-3,
        "epochs": 3,
        "fast": "true",
        "name": "a-b",
    }
    spec = {
        "experiment": f"{PARENT}/metadataStores/default/contexts/exp",
        "baseOutputDirectory": {"outputUriPrefix": "gs://b/out/Job_Folder.1/"},
        "workerPoolSpecs": [{"pythonPackageSpec": {"args": ["--x=2"]}}],
    }
    run = job_run(spec, None)
    assert run is not None and (run.parent, run.experiment, run.run, run.params) == (
        PARENT,
        "exp",
        "job-folder-1",
        {"x": 2},
    )
    named = job_run({**spec, "experimentRun": f"{PARENT}/metadataStores/default/contexts/exp-first"}, None)
    assert named is not None and named.run == "first"
    trial = job_run({**spec, "baseOutputDirectory": {"outputUriPrefix": "gs://b/out/hpt-folder/3"}}, None)
    assert trial is not None and trial.run == "hpt-folder-3"
    assert job_run({"workerPoolSpecs": []}, None) is None


def test_local_run_writes_the_experiment_run_into_its_run_folder(
    cli: Any, write_template: Any, tmp_path: Path
) -> None:
    extra = "experiment:\n  name: exp-local\n  experiment_run: first\n"
    path = write_template(JOB_SCRIPT, name="exp-local", extra=extra)
    out = tmp_path / "run"
    code, _, err = cli("local-run", str(path), "--out", str(out))
    assert code == 0, err
    record = json.loads((out / "experiment_run.json").read_text())
    assert (record["experiment"], record["experiment_run"]) == ("exp-local", "first")
    assert record["run_context"].endswith("/metadataStores/default/contexts/exp-local-first")
    assert record["params"] == {"epochs": 1} and record["metrics"] == {"loss": 0.25}
    assert record["time_series"] == {"loss": [[1, 0.5], [2, 0.25]]}


def test_bad_requests_are_4xx_naming_the_problem(aiplatform: Any, emu: Emulator) -> None:
    import urllib.error
    import urllib.request

    store = f"/v1/{PARENT}/metadataStores/default"
    aiplatform.Artifact.create(
        schema_title="system.Dataset", uri="gs://vd-staging/hostile"
    )  # the store exists

    def call(verb: str, path: str, body: object) -> tuple[int, str]:
        request = urllib.request.Request(
            emu.vertex_endpoint + path, data=json.dumps(body).encode(), method=verb
        )
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())["error"]["message"]

    assert call("POST", f"{store}/contexts?contextId=a%2Fb", {}) == (
        400,
        "contextId: 'a/b' is not a valid id",
    )
    assert call("POST", f"{store}/contexts?contextId=dup", {})[0] == 200
    assert call("POST", f"{store}/contexts?contextId=dup", {})[0] == 409
    status, message = call("POST", f"/v1/{PARENT}/metadataStores/nope/contexts", {})
    assert status == 404 and "metadataStores/nope" in message
    status, message = call("POST", f"{store}/contexts/dup:addContextChildren", {"childContexts": "x"})
    assert status == 400 and "childContexts: expected a list" in message
    status, message = call(
        "POST", f"{store}/contexts/dup:addContextChildren", {"childContexts": [f"{store[4:]}/contexts/dup"]}
    )
    assert status == 400 and "its own child" in message
    status, message = call("GET", f"/v1/{PARENT}/tensorboards/none:batchRead", None)
    assert status == 404


AUTOLOG_SCRIPT = """
import os
print("experiment", os.environ["AIP_EXPERIMENT_NAME"], "run", os.environ["AIP_EXPERIMENT_RUN_NAME"])
"""


def test_from_local_script_with_enable_autolog_is_taken_and_run(
    aiplatform: Any, tensorboard: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CustomJob.from_local_script(enable_autolog=True) + run(experiment=, experiment_run=): the emulator
    takes the SDK's package (the script behind `aiplatform.autolog()`, requiring
    google-cloud-aiplatform[autologging]) and installs its requirements. Without MLflow and with no index
    that has it, the job fails at that step, fast, naming enable_autolog and MLflow; with MLflow here, it
    runs (its replica sees the experiment and run)."""
    script = tmp_path / "train.py"
    script.write_text(AUTOLOG_SCRIPT)
    (tmp_path / "no-wheels").mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # offline: pip finds nothing but what is installed already
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "no-wheels"))
    aiplatform.init(experiment="exp-autolog", experiment_tensorboard=tensorboard)
    aiplatform.ExperimentRun.create("autolog-run", experiment="exp-autolog")
    job = aiplatform.CustomJob.from_local_script(
        display_name="exp-autolog",
        script_path=str(script),
        container_uri="us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest",
        enable_autolog=True,
    )
    try:
        import mlflow  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError) as failed:
            job.run(experiment="exp-autolog", experiment_run="autolog-run")
        assert "enable_autolog" in str(failed.value) and "MLflow" in str(failed.value), failed.value
        assert job.state.name == "JOB_STATE_FAILED"
    else:
        job.run(experiment="exp-autolog", experiment_run="autolog-run")
        assert job.state.name == "JOB_STATE_SUCCEEDED"
