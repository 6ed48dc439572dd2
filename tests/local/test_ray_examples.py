"""The chapter's Ray Train and Ray Tune scripts (examples/ray_train, examples/ray_tune: no vertexdist in
them) through `local-run` on their 2-replica templates, both at once: two Ray clusters side by side on this
machine, each replica a real Ray node."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WORKER_LINE = re.compile(r"worker (\d+)/(\d+) on node (\w+): epoch (\d+), loss [\d.]+$")
CLUSTER_LINE = re.compile(r"^Ray cluster: nodes ([\w, ]+); 0 GPUs; (\d+) training workers$")
TRIAL_LINE = re.compile(r"^trial \S+: lr [\d.]+, hidden \d+, (\d+) epoch\(s\), accuracy [\d.]+, node (\w+)$")


def head_log(run: Path) -> list[str]:
    """The head's log without the live view's prefixes: the driver's lines and its workers'."""
    return (run / "logs" / "workerpool0-0.log").read_text().splitlines()


def check_train(run: Path) -> None:
    lines = head_log(run)
    [cluster] = [m for line in lines if (m := CLUSTER_LINE.match(line))]
    nodes, num_workers = set(cluster.group(1).split(", ")), int(cluster.group(2))
    assert len(nodes) == 2 and num_workers == 2  # one CPU worker per node
    reports = {m.groups()[:4] for line in lines if (m := WORKER_LINE.search(line))}
    # Every worker reported every epoch, in a world of ScalingConfig.num_workers, spread over both nodes.
    assert {(rank, epoch) for rank, _, _, epoch in reports} == {
        (str(r), str(e)) for r in range(2) for e in range(3)
    }
    assert {int(world) for _, world, _, _ in reports} == {num_workers}
    by_rank = {rank: node for rank, _, node, _ in reports}
    assert set(by_rank.values()) == nodes, by_rank
    assert f"(world size {num_workers})" in next(line for line in lines if line.startswith("Final loss:"))
    [checkpoint] = [
        line.removeprefix("Best checkpoint: ") for line in lines if line.startswith("Best checkpoint:")
    ]
    assert Path(checkpoint).is_relative_to(run / "gcs"), checkpoint  # AIP_CHECKPOINT_DIR, under the run
    assert (Path(checkpoint) / "model.pt").stat().st_size > 0


def check_tune(run: Path, samples: int = 8, max_epochs: int = 10) -> None:
    lines = head_log(run)
    trials = [m for line in lines if (m := TRIAL_LINE.match(line))]
    assert len(trials) == samples, "\n".join(lines[-40:])  # every trial ended with a result
    epochs = [int(m.group(1)) for m in trials]
    assert all(1 <= e <= max_epochs for e in epochs)
    assert min(epochs) < max_epochs, f"ASHA stopped no trial early: {epochs}"
    assert max(epochs) == max_epochs  # the best went the whole way
    assert any(line.startswith("Best accuracy: ") for line in lines)


def local_run(template: Path, out: Path, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "local-run", str(template), "--out", str(out)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_the_ray_train_and_ray_tune_examples_run_side_by_side(tmp_path: Path, examples: Any) -> None:
    train_run, tune_run = tmp_path / "train", tmp_path / "tune"
    train = local_run(examples.ROOT / "ray_train" / "job.yaml", train_run, tmp_path)
    tune = local_run(examples.ROOT / "ray_tune" / "job.yaml", tune_run, tmp_path)
    try:
        train_out, _ = train.communicate(timeout=300)
        tune_out, _ = tune.communicate(timeout=300)
    finally:
        for cli in (train, tune):
            if cli.poll() is None:
                cli.kill()
                cli.communicate()
    assert train.returncode == 0, train_out[-6000:]
    assert tune.returncode == 0, tune_out[-6000:]
    check_train(train_run)
    check_tune(tune_run)
