"""The bundled trainer reports its validation metric the way cloudml-hypertune does, so a tuning job can
tune its `--lr` and `--batch-size`: one report per epoch (epoch = step), in the file Vertex names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vertexdist.tuning.hypertune import ReportLog

from .conftest import REPO_ROOT, clean_env

pytestmark = [pytest.mark.integration]


def train(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **clean_env(),
        "CLOUD_ML_HP_METRIC_FILE": str(tmp_path / "hp" / "out.metrics"),
        "CLOUD_ML_TRIAL_ID": "4",
        "OMP_NUM_THREADS": "1",
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer_pkg.task",
            "--epochs=2",
            "--samples=400",
            "--nproc-per-node=1",
            f"--model-dir={tmp_path / 'model'}",
            f"--checkpoint-dir={tmp_path / 'ckpt'}",
            *args,
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_validation_accuracy_is_reported_per_epoch_in_the_hypertune_format(tmp_path: Path) -> None:
    result = train(tmp_path, "--hp-metric-tag=val_accuracy")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in (tmp_path / "hp" / "out.metrics").read_text().splitlines()]
    assert [line["global_step"] for line in lines] == ["1", "2"]
    assert {tuple(sorted(line)) for line in lines} == {
        ("checkpoint_path", "global_step", "timestamp", "trial", "val_accuracy")  # cloudml-hypertune's keys
    }
    assert {line["trial"] for line in lines} == {"4"}
    log = ReportLog()
    log.add((tmp_path / "hp" / "out.metrics").read_text())
    values = [m.values["val_accuracy"] for m in log.measurements()]
    assert len(values) == 2 and all(0.0 <= v <= 1.0 for v in values)
    assert "val_accuracy" in result.stdout and "(reported for tuning)" in result.stdout


def test_the_loss_can_be_the_metric(tmp_path: Path) -> None:
    result = train(tmp_path, "--hp-metric-tag=loss", "--hp-metric=val_loss")
    assert result.returncode == 0, result.stderr
    [first, _second] = (tmp_path / "hp" / "out.metrics").read_text().splitlines()
    assert float(json.loads(first)["loss"]) > 0


def test_csv_data_needs_validation_rows(tmp_path: Path) -> None:
    data = tmp_path / "d.csv"
    data.write_text("a,churn\n1,0\n2,1\n")
    result = train(tmp_path, f"--data={data}", "--hp-metric-tag=val_accuracy")
    assert result.returncode != 0 and "needs --val-data" in result.stderr


def test_fsdp_scores_on_every_rank_and_reports_once(tmp_path: Path) -> None:
    # Under FSDP the forward is a collective: a forward on rank 0 alone would wait for the others forever.
    result = train(tmp_path, "--hp-metric-tag=val_accuracy", "--strategy=fsdp", "--nproc-per-node=2")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in (tmp_path / "hp" / "out.metrics").read_text().splitlines()]
    assert [line["global_step"] for line in lines] == ["1", "2"]  # rank 0's reports only
