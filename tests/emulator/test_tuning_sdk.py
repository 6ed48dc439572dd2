"""The SDK's HyperparameterTuningJob, unchanged, against the emulator: `run()` tunes with real trial
processes (the Vertex-style trial script: `--name=value` args, cloudml-hypertune reports) and every trial
and its final measurement read back through `job.trials`; failing trials fail the job by
max_failed_trial_count; cancel, get, list and delete; a running job is FAILED after an emulator restart.
One emulator for this module (its own data folder)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vertexdist.emulator import Emulator

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROJECT = "test-proj"
TRIAL_SCRIPT = Path(__file__).parents[1] / "tuning" / "objective_trial.py"


@pytest.fixture(scope="module")
def tuning_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    emu = Emulator(data_dir=tmp_path_factory.mktemp("tuning-emulator"), hold_get_s=5.0)
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def aiplatform(tuning_emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform

    monkeypatch.setenv("VERTEX_API_ENDPOINT", tuning_emulator.vertex_endpoint)
    aiplatform.init(
        project=PROJECT,
        location="us-central1",
        staging_bucket="gs://vd-staging/stage",
        credentials=AnonymousCredentials(),
        api_endpoint=tuning_emulator.vertex_endpoint,
        api_transport="rest",
    )
    return aiplatform


def hpt_job(aiplatform: Any, name: str, *args: str, **options: Any) -> Any:
    """The docs' example shape: a CustomJob of one container replica, then HyperparameterTuningJob(...)."""
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    custom_job = aiplatform.CustomJob(
        display_name=f"{name}-trial",
        worker_pool_specs=[
            {
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "container_spec": {
                    "image_uri": "example.com/trainer:latest",
                    "command": [sys.executable, str(TRIAL_SCRIPT)],
                    "args": list(args),
                },
            }
        ],
    )
    defaults: dict[str, Any] = {
        "metric_spec": {"score": "maximize"},
        "parameter_spec": {
            "x": hpt.DoubleParameterSpec(min=0, max=1, scale="linear"),
            "units": hpt.IntegerParameterSpec(min=1, max=8, scale="linear"),
            "opt": hpt.CategoricalParameterSpec(values=["adam", "sgd"]),
        },
        "max_trial_count": 4,
        "parallel_trial_count": 2,
        "search_algorithm": "random",
    }
    return aiplatform.HyperparameterTuningJob(
        display_name=name, custom_job=custom_job, **{**defaults, **options}
    )


def replica_log(emu: Emulator, custom_job: str) -> str:
    return "".join(path.read_text() for path in emu.service.log_files(custom_job).values())


def test_run_tunes_and_every_trial_reads_back(
    aiplatform: Any, tuning_emulator: Emulator, host_gcs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = hpt_job(aiplatform, "sdk-hpt")
    job.run()
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    trials = job.trials
    assert [t.id for t in trials] == ["1", "2", "3", "4"]
    for trial in trials:
        assert trial.state.name == "SUCCEEDED"
        values = {p.parameter_id: p.value for p in trial.parameters}
        assert set(values) == {"x", "units", "opt"} and 0 <= values["x"] <= 1
        [metric] = trial.final_measurement.metrics
        expected = 1 - (values["x"] - 0.3) ** 2 - (values["units"] - 4) ** 2 / 100
        expected += 0.05 if values["opt"] == "adam" else 0.0
        assert metric.metric_id == "score" and metric.value == pytest.approx(expected - 0.1 / 3)
        assert trial.final_measurement.step_count == 3 and len(trial.measurements) == 3
        assert trial.start_time and trial.end_time
        log = replica_log(tuning_emulator, trial.custom_job)
        assert f"trial {trial.id} args ['--x={values['x']!r}', '--units={int(values['units'])}'," in log
        assert f"/{trial.id}/model/" in log  # AIP_MODEL_DIR under <base output dir>/<trial id>/
    # Each trial wrote its score through /gcs/BUCKET/...: objects of the emulated Cloud Storage now.
    from google.cloud import storage

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", tuning_emulator.storage_endpoint)
    scores = {
        blob.name.split("/")[-3]: blob.download_as_text()
        for blob in storage.Client(project=PROJECT).list_blobs("vd-staging")
        if blob.name.endswith("/model/score.txt")
    }
    assert sorted(scores) == ["1", "2", "3", "4"]
    again = aiplatform.HyperparameterTuningJob.get(job.resource_name)
    assert [t.final_measurement.metrics[0].value for t in again.trials] == [
        t.final_measurement.metrics[0].value for t in trials
    ]
    assert job.resource_name in [j.resource_name for j in aiplatform.HyperparameterTuningJob.list()]


def test_failing_trials_fail_the_job_at_max_failed_trial_count(aiplatform: Any, cli: Any) -> None:
    from google.cloud.aiplatform import hyperparameter_tuning as hpt

    job = hpt_job(
        aiplatform,
        "sdk-hpt-failing",
        "--fail-even",
        parameter_spec={"units": hpt.IntegerParameterSpec(min=1, max=6, scale="linear")},
        search_algorithm="grid",
        max_trial_count=6,
        parallel_trial_count=1,
        max_failed_trial_count=2,
    )
    with pytest.raises(RuntimeError, match="2 trials failed"):
        job.run()
    assert job.state.name == "JOB_STATE_FAILED"
    assert [t.state.name for t in job.trials] == ["SUCCEEDED", "INFEASIBLE", "SUCCEEDED", "INFEASIBLE"]
    failed = [t.infeasible_reason for t in job.trials if t.state.name == "INFEASIBLE"]
    assert all("exited with a non-zero status of 1" in reason for reason in failed)
    # `vertexdist trials` says why each failed trial failed: its replica's last lines.
    code, out, _err = cli("trials", job.resource_name)
    assert code == 1
    assert "trial 2 INFEASIBLE: The replica workerpool0-0 exited with a non-zero status of 1" in out
    assert "\n    failing on purpose for units=2\n" in out and "units=4\n" in out


def test_cancel_stops_the_trials_then_delete(
    aiplatform: Any, tuning_emulator: Emulator, tmp_path: Path
) -> None:
    from google.api_core import exceptions

    tuning_emulator.service.hold_get_s = 0
    try:
        job = hpt_job(aiplatform, "sdk-hpt-cancel", "--sleep=60", "--steps=1", f"--pid-dir={tmp_path}")
        job.run(sync=False)
        job.wait_for_resource_creation()
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("*.pid"))) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        job.cancel()
        while job.state.name != "JOB_STATE_CANCELLED":
            assert time.monotonic() < deadline, job.state
            time.sleep(0.2)
    finally:
        tuning_emulator.service.hold_get_s = 5.0
    for pid_file in tmp_path.glob("*.pid"):
        pid = int(pid_file.stem)
        assert not Path(f"/proc/{pid}").exists() or "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text()
    assert job.error.code == 1
    with pytest.raises(RuntimeError, match="CANCELED"):
        job.wait()  # run(sync=False)'s future ends as run() would: the job was cancelled
    aiplatform.HyperparameterTuningJob.get(job.resource_name).delete()  # `job` keeps re-raising that
    with pytest.raises(exceptions.NotFound):
        aiplatform.HyperparameterTuningJob.get(job.resource_name)


def test_trials_command_prints_the_table_with_the_best_marked(
    aiplatform: Any,
    tuning_emulator: Emulator,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    import json

    from vertexdist.cli import main

    job = hpt_job(aiplatform, "sdk-hpt-table", max_trial_count=3, parallel_trial_count=3)
    job.run()
    best = max(job.trials, key=lambda t: t.final_measurement.metrics[0].value)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    for args in (["trials", job.resource_name], ["trials", job.resource_name, "--json"]):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main.run(args)
        assert exit_info.value.code in (0, None)
        out = capsys.readouterr().out
        if "--json" in args:
            rows = json.loads(out)
            assert [r["id"] for r in rows if r["best"]] == [best.id]
            assert {r["state"] for r in rows} == {"SUCCEEDED"}
        else:
            lines = out.splitlines()
            assert lines[1].split() == ["trial", "state", "x", "units", "opt", "score", "step"]
            assert any(line.startswith(f"{best.id} *") for line in lines[2:5])
            assert lines[-1].startswith(f"best: trial {best.id} (score ")


def test_a_job_running_when_the_emulator_stops_is_failed_after_restart(tmp_path: Path) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import JobServiceClient

    def client(emu: Emulator) -> Any:
        return JobServiceClient(
            transport="rest",
            client_options={"api_endpoint": emu.vertex_endpoint},
            credentials=AnonymousCredentials(),
        )

    body = {
        "display_name": "restart-hpt",
        "study_spec": {
            "metrics": [{"metric_id": "score", "goal": "MAXIMIZE"}],
            "parameters": [{"parameter_id": "units", "integer_value_spec": {"min_value": 1, "max_value": 4}}],
        },
        "max_trial_count": 2,
        "parallel_trial_count": 1,
        "trial_job_spec": {
            "worker_pool_specs": [
                {
                    "machine_spec": {"machine_type": "n1-standard-4"},
                    "replica_count": 1,
                    "container_spec": {
                        "image_uri": "x",
                        "command": [sys.executable, str(TRIAL_SCRIPT), "--sleep=60", "--steps=1"],
                    },
                }
            ]
        },
    }
    data = tmp_path / "data"
    with Emulator(data_dir=data) as emu:
        created = client(emu).create_hyperparameter_tuning_job(
            parent=f"projects/{PROJECT}/locations/us-central1", hyperparameter_tuning_job=body
        )
        deadline = time.monotonic() + 60
        while not client(emu).get_hyperparameter_tuning_job(name=created.name).trials:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    with Emulator(data_dir=data) as emu:
        found = client(emu).get_hyperparameter_tuning_job(name=created.name)
        assert found.state.name == "JOB_STATE_FAILED" and "did not survive the restart" in found.error.message
        assert [t.state.name for t in found.trials] == ["INFEASIBLE"]
        assert found.study_spec.metrics[0].metric_id == "score"
    assert os.path.isdir(data / "resources" / "hyperparameterTuningJobs")


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from vertexdist.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main.run(list(args))
    out = capsys.readouterr()
    code = exit_info.value.code
    return (code if isinstance(code, int) else 0), out.out, out.err


def test_submit_a_tuning_template_then_status_list_and_dry_run(
    tuning_emulator: Emulator,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    import json
    import shutil

    import yaml

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VERTEX_API_ENDPOINT", tuning_emulator.vertex_endpoint)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", tuning_emulator.storage_endpoint)
    staging_bucket()
    shutil.copy(TRIAL_SCRIPT, tmp_path / "trial.py")
    template = tmp_path / "tune.yaml"
    template.write_text(
        yaml.safe_dump(
            {
                "display_name": "submitted-tuning",
                "project": PROJECT,
                "staging_bucket": "gs://tune-bucket/staging",
                "container_uri": "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest",
                "machine_type": "n1-standard-4",
                "trainer": {"script": "trial.py"},
                "tuning": {
                    "metric_spec": {"score": "maximize"},
                    "parameter_spec": {"units": {"type": "integer", "min": 3, "max": 5}},
                    "max_trial_count": 3,
                    "parallel_trial_count": 3,
                    "search_algorithm": "grid",
                },
            }
        )
    )
    code, out, _ = _cli(capsys, "submit", str(template), "--dry-run")
    assert code == 0 and set(json.loads(out)) == {"parent", "hyperparameterTuningJob"}
    code, out, err = _cli(capsys, "submit", str(template))
    assert code == 0, err
    name = out.strip().splitlines()[0]
    assert "/hyperparameterTuningJobs/" in name and "job SUCCEEDED: submitted-tuning" in err
    code, out, _ = _cli(capsys, "status", name)
    assert code == 0 and "state:        SUCCEEDED" in out
    code, out, _ = _cli(capsys, "list", "--project", PROJECT)
    assert name in out
    trial_jobs = [t.custom_job for t in aiplatform_trials(tuning_emulator, name)]
    assert len(trial_jobs) == 3 and not any(job in out for job in trial_jobs)  # trials are the tuning job's
    code, out, _ = _cli(capsys, "trials", name)
    assert code == 0 and "best: trial 2 (score " in out  # units=4 is the optimum


def test_cancel_command_cancels_a_detached_tuning_job(
    tuning_emulator: Emulator,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    import yaml

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VERTEX_API_ENDPOINT", tuning_emulator.vertex_endpoint)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", tuning_emulator.storage_endpoint)
    staging_bucket()
    template = tmp_path / "tune.yaml"
    template.write_text(
        yaml.safe_dump(
            {
                "display_name": "cancelled-tuning",
                "project": PROJECT,
                "staging_bucket": "gs://tune-bucket/staging",
                "machine_type": "n1-standard-4",
                "container_uri": "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest",
                "trainer": {"script": str(TRIAL_SCRIPT), "args": ["--sleep=60", "--steps=1"]},
                "tuning": {
                    "metric_spec": {"score": "maximize"},
                    "parameter_spec": {"units": {"type": "integer", "min": 1, "max": 2}},
                    "max_trial_count": 2,
                    "parallel_trial_count": 2,
                },
            }
        )
    )
    code, out, err = _cli(capsys, "submit", str(template), "--detach", "--yes")
    assert code == 0, err
    name = out.strip().splitlines()[0]
    deadline = time.monotonic() + 60
    while len(aiplatform_trials(tuning_emulator, name)) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    code, out, _ = _cli(capsys, "cancel", name)
    assert code == 0 and f"cancel requested: {name}" in out
    while _cli(capsys, "status", name, "--json")[1].find('"state": "CANCELLED"') < 0:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert _cli(capsys, "status", name)[0] == 1  # a cancelled job, as for any job


def staging_bucket() -> None:
    """The bucket submit uploads the trainer to, in the emulated Cloud Storage (STORAGE_EMULATOR_HOST)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project=PROJECT, credentials=AnonymousCredentials())
    if client.lookup_bucket("tune-bucket") is None:
        client.create_bucket("tune-bucket")


def aiplatform_trials(emu: Emulator, name: str) -> list[Any]:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import JobServiceClient

    client = JobServiceClient(
        transport="rest",
        client_options={"api_endpoint": emu.vertex_endpoint},
        credentials=AnonymousCredentials(),
    )
    return list(client.get_hyperparameter_tuning_job(name=name).trials)
