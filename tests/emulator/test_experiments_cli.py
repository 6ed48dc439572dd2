"""`vertexdist experiments list|runs` against the session emulator: two runs made through the SDK, read back
as JSON and as the table (`get_experiment_df`'s param.X / metric.X columns)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = [pytest.mark.integration]


@pytest.fixture(autouse=True)
def no_current_experiment() -> Iterator[None]:
    """The SDK's experiment tracker is module state: leave none set for the next test."""
    yield
    from google.cloud.aiplatform.metadata import metadata

    metadata._experiment_tracker.reset()
    metadata._experiment_tracker._global_tensorboard = None


def test_experiments_runs_lists_the_sdk_runs_as_json_and_as_a_table(aiplatform: Any, cli: Any) -> None:
    tensorboard = aiplatform.Tensorboard.create(display_name="experiments-cli-tb")
    aiplatform.init(experiment="exp-cli", experiment_tensorboard=tensorboard)
    for run, lr, accuracy in (("run-a", 0.1, 0.75), ("run-b", 0.01, 0.5)):
        aiplatform.start_run(run)
        aiplatform.log_params({"lr": lr, "optimizer": "adam"})
        aiplatform.log_metrics({"accuracy": accuracy})
        aiplatform.end_run()

    code, out, err = cli("experiments", "runs", "exp-cli", "--project", "test-proj", "--json")
    assert code == 0, err
    found = json.loads(out)
    assert found["experiment"] == "exp-cli"
    by_name = {run["run_name"]: run for run in found["runs"]}
    assert set(by_name) == {"run-a", "run-b"}
    assert by_name["run-a"]["state"] == "COMPLETE"
    assert by_name["run-a"]["params"] == {"lr": 0.1, "optimizer": "adam"}
    assert by_name["run-b"]["params"] == {"lr": 0.01, "optimizer": "adam"}
    assert by_name["run-a"]["metrics"] == {"accuracy": 0.75}
    assert by_name["run-b"]["metrics"] == {"accuracy": 0.5}

    code, out, err = cli("experiments", "runs", "exp-cli", "--project", "test-proj")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split() == ["run_name", "state", "param.lr", "param.optimizer", "metric.accuracy"]
    assert sorted(row.split() for row in rows) == [
        ["run-a", "COMPLETE", "0.1", "adam", "0.75"],
        ["run-b", "COMPLETE", "0.01", "adam", "0.5"],
    ]

    code, out, err = cli("experiments", "list", "--project", "test-proj")
    assert code == 0, err
    assert "exp-cli" in out.split()


def test_an_unknown_experiment_is_one_error_line(cli: Any, emu: Any) -> None:
    code, out, err = cli("experiments", "runs", "no-such-experiment", "--project", "test-proj")
    assert code == 1 and not out
    assert "error: reading experiment no-such-experiment: not found in projects/test-proj" in err
    assert "Traceback" not in err


def test_a_run_whose_display_name_is_no_resource_id_still_lists(aiplatform: Any, cli: Any, emu: Any) -> None:
    # Another client named a run "My run #2": the SDK's get_experiment_df, which looks up each run's
    # TensorBoard run by its display name, fails (issue 41); its params and metrics still read.
    import urllib.request

    aiplatform.init(experiment="exp-odd-name")
    aiplatform.start_run("run-1")
    aiplatform.log_params({"lr": 0.1})
    aiplatform.end_run()
    store = f"{emu.vertex_endpoint}/v1/projects/test-proj/locations/us-central1/metadataStores/default"
    body = {
        "displayName": "My run #2",
        "schemaTitle": "system.ExperimentRun",
        "schemaVersion": "0.0.1",
        "metadata": {"made_by": "another client"},
    }
    for url, data in (
        (f"{store}/contexts?contextId=exp-odd-name-run-2", body),
        (
            f"{store}/contexts/exp-odd-name:addContextChildren",
            {"childContexts": [store.split("/v1/", 1)[1] + "/contexts/exp-odd-name-run-2"]},
        ),
    ):
        sent = urllib.request.Request(
            url, json.dumps(data).encode(), {"Content-Type": "application/json"}, method="POST"
        )
        urllib.request.urlopen(sent).close()
    code, out, err = cli("experiments", "runs", "exp-odd-name", "--project", "test-proj", "--json")
    assert code == 0, err
    runs = {run["run_name"]: run for run in json.loads(out)["runs"]}
    assert set(runs) == {"run-1", "My run #2"} and runs["run-1"]["params"] == {"lr": 0.1}
