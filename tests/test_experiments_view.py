"""The pure parts of `vertexdist experiments`: get_experiment_df's records as runs, the runs table,
local-run's records as runs, and `--help` without the SDK."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from vertexdist.cli.experiments_view import table
from vertexdist.jobs.experiments import local_experiments, local_runs, runs_of_frame


def test_frame_records_become_runs_without_the_columns_a_run_lacks() -> None:
    records = [
        {"experiment_name": "e", "run_name": "a", "run_type": "system.ExperimentRun", "state": "COMPLETE",
         "param.lr": 0.1, "metric.acc": 0.5, "time_series_metric.loss": 0.25, "param.extra": float("nan")},
        {"experiment_name": "e", "run_name": "b", "state": "RUNNING", "param.lr": 0.01, "metric.acc": None},
    ]  # fmt: skip
    assert runs_of_frame(records) == [
        {"run_name": "a", "state": "COMPLETE", "params": {"lr": 0.1}, "metrics": {"acc": 0.5},
         "time_series_metrics": {"loss": 0.25}},
        {"run_name": "b", "state": "RUNNING", "params": {"lr": 0.01}, "metrics": {},
         "time_series_metrics": {}},
    ]  # fmt: skip


def test_the_table_has_a_param_and_a_metric_column_each_and_dashes_for_gaps() -> None:
    runs = [
        {"run_name": "run-a", "state": "COMPLETE", "params": {"lr": 0.1, "opt": "adam"},
         "metrics": {"acc": 0.75}, "time_series_metrics": {"loss": 2.0}},
        {"run_name": "b", "state": "RUNNING", "params": {"lr": 1e-05}, "metrics": {}},
    ]  # fmt: skip
    assert table(runs) == [
        "run_name  state     param.lr  param.opt  metric.acc  time_series_metric.loss",
        "run-a     COMPLETE  0.1       adam       0.75        2",
        "b         RUNNING   1e-05     -          -           -",
    ]


def test_local_runs_come_from_the_run_folders_records(tmp_path: Path) -> None:
    for job, experiment, run in (("job-1", "sweep", "r1"), ("job-2", "other", "r2")):
        (tmp_path / job).mkdir()
        record = {"experiment": experiment, "experiment_run": run, "params": {"lr": 0.1},
                  "metrics": {"loss": 0.5}, "time_series": {"loss": [[1, 1.0], [2, 0.5]]}}  # fmt: skip
        (tmp_path / job / "experiment_run.json").write_text(json.dumps(record))
    (tmp_path / "job-3").mkdir()
    (tmp_path / "job-3" / "experiment_run.json").write_text("{not json")
    assert local_experiments(tmp_path) == ["other", "sweep"]
    (run,) = local_runs(tmp_path, "sweep")
    assert run["run_name"] == "r1" and run["job"] == "job-1" and run["state"] == "COMPLETE"
    assert run["params"] == {"lr": 0.1} and run["metrics"] == {"loss": 0.5}
    assert run["time_series"] == {"loss": [[1, 1.0], [2, 0.5]]}
    assert local_runs(tmp_path / "missing", "sweep") == []


def test_help_does_not_import_the_sdk() -> None:
    code = (
        "import sys\nfrom vertexdist.cli import main\n"
        "try:\n    main.run(['experiments', 'runs', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('SDK' if 'google.cloud.aiplatform' in sys.modules else 'clean')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "param.X" in done.stdout and done.stdout.strip().endswith("clean")
