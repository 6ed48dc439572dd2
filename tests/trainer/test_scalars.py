"""The bundled trainer's TensorBoard scalars: loss per step, loss and accuracy per epoch, in
AIP_TENSORBOARD_LOG_DIR, read back with tensorboard's own reader; without tensorboard, no scalars and the
same run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO_ROOT, clean_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def train(tmp_path: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer_pkg.task",
            "--epochs=2",
            "--samples=640",
            "--batch-size=16",
            "--nproc-per-node=1",
            f"--model-dir={tmp_path / 'model'}",
            f"--checkpoint-dir={tmp_path / 'ckpt'}",
            *extra,
        ],
        cwd=REPO_ROOT,
        env={**clean_env(), "OMP_NUM_THREADS": "1", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_scalars_go_to_the_tensorboard_folder(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    # As Vertex sets it: a gs:// folder, written through its FUSE path (VERTEXDIST_GCS_ROOT here).
    done = train(
        tmp_path,
        {"AIP_TENSORBOARD_LOG_DIR": "gs://bucket/job/logs/", "VERTEXDIST_GCS_ROOT": str(tmp_path / "gcs")},
    )
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "gcs" / "bucket" / "job" / "logs"
    assert list(folder.glob("events.out.tfevents.*")), sorted(p.name for p in tmp_path.rglob("*"))
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    assert {"train/loss", "epoch/loss", "epoch/accuracy"} <= set(events.Tags()["scalars"])
    # 640 rows, batch 16, 1 rank: 40 steps an epoch, the batch loss every 10th step.
    assert [e.step for e in events.Scalars("train/loss")] == list(range(10, 81, 10))
    assert [e.step for e in events.Scalars("epoch/loss")] == [1, 2]
    accuracy = [e.value for e in events.Scalars("epoch/accuracy")]
    assert all(0.0 <= a <= 1.0 for a in accuracy) and accuracy[-1] > 0.5
    losses = [e.value for e in events.Scalars("epoch/loss")]
    # The same numbers the log prints for each epoch.
    for epoch, loss in enumerate(losses, start=1):
        assert f"epoch {epoch}/2  loss {loss:.4f}" in done.stdout


def test_fsdp_ranks_all_score_the_epoch_accuracy_rank_0_writes_it(tmp_path: Path) -> None:
    """Under fsdp the accuracy's forward is a collective: every rank runs it (else rank 0 waits forever)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    folder = tmp_path / "logs"
    done = train(tmp_path, {"AIP_TENSORBOARD_LOG_DIR": str(folder)}, "--nproc-per-node=2", "--strategy=fsdp")
    assert done.returncode == 0, done.stderr
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    events.Reload()
    # 640 rows, batch 16 per rank, 2 ranks: 20 steps an epoch.
    assert [e.step for e in events.Scalars("train/loss")] == [10, 20, 30, 40]
    accuracy = [e.value for e in events.Scalars("epoch/accuracy")]
    assert len(accuracy) == 2 and all(0.0 <= a <= 1.0 for a in accuracy)
    assert len(list(folder.glob("events.out.tfevents.*"))) == 1  # rank 0's writer only


def test_no_tensorboard_package_no_scalars_same_run(tmp_path: Path) -> None:
    """A `tensorboard` that cannot be imported (as where the package is not installed): the run is the
    same, silently, with no event files."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "tensorboard.py").write_text("raise ImportError('no tensorboard here')\n")
    env = clean_env()
    done = train(
        tmp_path,
        {
            "AIP_TENSORBOARD_LOG_DIR": str(tmp_path / "logs"),
            "PYTHONPATH": f"{shadow}:{env['PYTHONPATH']}",
        },
    )
    assert done.returncode == 0, done.stderr
    assert "tensorboard" not in done.stderr.lower()
    assert not (tmp_path / "logs").exists()
    assert "epoch 2/2  loss" in done.stdout
