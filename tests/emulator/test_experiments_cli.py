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
