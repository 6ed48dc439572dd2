"""The chapter's Ray Train and Ray Tune scripts (examples/ray_train, examples/ray_tune: no vertexdist in
them) on their 2-replica templates, two jobs at once on this machine, each replica a real Ray node: the
Tune example through `local-run`, the Train example through `submit --emulator` (the real SDK path to a
local Vertex, whose job the local backend runs with the same shipped launcher as local-run's). One job
each: the Train example through local-run as well was a third Ray cluster on 2 cores that checked nothing
these two do not (the head log's lines are the launcher's on both paths; local-run's piped output and its
stopped Ray nodes are checked on the Tune job)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

# Two Ray clusters on 2 cores, beside another test file: minutes, within the 420 s each CLI is given.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(480)]

WORKER_LINE = re.compile(r"worker (\d+)/(\d+) on node (\w+): epoch (\d+), loss [\d.]+$")
CLUSTER_LINE = re.compile(r"^Ray cluster: nodes ([\w, ]+); 0 GPUs; (\d+) training workers$")
TRIAL_LINE = re.compile(r"^trial \S+: lr [\d.]+, hidden \d+, (\d+) epoch\(s\), accuracy [\d.]+, node (\w+)$")
# Two clusters share 2 cores here: give Ray Train's worker group longer than its 60 s to start.
SLOW_MACHINE = {"RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": "300", "NO_GCE_CHECK": "true"}


def head_log(logs: Path) -> list[str]:
    """The head's log: the driver's lines and every Ray worker's, as the driver got them."""
    return (logs / "workerpool0-0.log").read_text().splitlines()


def check_train(logs: Path, gcs_root: Path) -> None:
    lines = head_log(logs)
    [cluster] = [m for line in lines if (m := CLUSTER_LINE.match(line))]
    nodes, num_workers = set(cluster.group(1).split(", ")), int(cluster.group(2))
    assert len(nodes) == 2 and num_workers == 2  # one CPU worker per node
    printed = Counter(m.groups()[:4] for line in lines if (m := WORKER_LINE.search(line)))
    assert set(printed.values()) == {1}, printed  # each print once (Ray Train's print patch doubled them)
    reports = set(printed)
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
    # AIP_CHECKPOINT_DIR through /gcs, as on Vertex; what the nodes wrote there is the job's gs:// folder.
    assert Path(checkpoint).is_relative_to("/gcs"), checkpoint
    assert (gcs_root / Path(checkpoint).relative_to("/gcs") / "model.pt").stat().st_size > 0
    worker = (logs / "workerpool1-0.log").read_text().splitlines()
    assert worker[-1] == (
        "vertexdist_launcher: workerpool1-0: the Ray driver on workerpool0-0 succeeded;"
        " stopping this Ray node"
    )


def check_tune(logs: Path, samples: int = 8, max_epochs: int = 10) -> None:
    lines = head_log(logs)
    trials = [m for line in lines if (m := TRIAL_LINE.match(line))]
    assert len(trials) == samples, "\n".join(lines[-40:])  # every trial ended with a result
    epochs = [int(m.group(1)) for m in trials]
    assert all(1 <= e <= max_epochs for e in epochs)
    assert min(epochs) < max_epochs, f"ASHA stopped no trial early: {epochs}"
    assert max(epochs) == max_epochs  # the best went the whole way
    assert any(line.startswith("Best accuracy: ") for line in lines)


def check_readable(output: str, logs: Path) -> None:
    """What a piped run prints: no terminal codes, no progress bars, none of Ray's PlacementGroupCleaner
    warnings, and folders that exist where Ray names its files (not a link that is gone)."""
    head = (logs / "workerpool0-0.log").read_text()
    assert "\x1b" not in output
    for text in (output, head):
        assert "Failed to query Ray Train Controller actor state" not in text
        assert "PlacementGroupCleaner" not in text
        assert not re.search(r"\d+%\|", text) and "row/s]" not in text, "a progress bar"
    for path in re.findall(r"(?:tensorboard --logdir|Full logs are in) `?([^\s`]+)", head):
        assert Path(path).exists(), path


def vertexdist(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "vertexdist", *args],
        cwd=cwd,
        env={**os.environ, **SLOW_MACHINE},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_the_ray_examples_run_through_local_run_and_the_emulator_side_by_side(
    tmp_path: Path, examples: Any, kit: Any, host_gcs: Any
) -> None:
    tune, data = tmp_path / "tune", tmp_path / "emulator"
    clis = {
        "local-run tune": vertexdist(
            "local-run", str(examples.ROOT / "ray_tune" / "job.yaml"), "--out", str(tune), cwd=tmp_path
        ),
        "submit --emulator train": vertexdist(
            "submit",
            str(examples.ROOT / "ray_train" / "job.yaml"),
            "--emulator",
            "--follow",
            "--emulator-data-dir",
            str(data),
            cwd=tmp_path,
        ),
    }
    outputs = {}
    try:
        for name, cli in clis.items():
            outputs[name] = cli.communicate(timeout=420)[0]
    finally:
        for cli in clis.values():
            if cli.poll() is None:
                cli.kill()
                cli.communicate()
    for name, cli in clis.items():
        assert cli.returncode == 0, f"{name}:\n{outputs[name][-6000:]}"

    check_tune(tune / "logs")
    # Ray stored the results at gs://.../model/ (AIP_MODEL_DIR) through pyarrow: the job's gs:// folder.
    found = (tune / "gcs").rglob("ray-tune-example")  # the job's output folder has the display name too
    [experiment] = [path for path in found if path.parent.name == "model"]
    assert len(list(experiment.glob("train_with_config_*"))) == 8, sorted(experiment.iterdir())
    check_readable(outputs["local-run tune"], tune / "logs")
    assert kit.job_processes(kit.replica_groups(tune), tune) == []  # every Ray node stopped with its job

    assert "job SUCCEEDED: ray-train-example" in outputs["submit --emulator train"]
    [job] = list((data / "jobs").iterdir())
    check_train(job / "logs", data / "gcs")  # the emulator's Cloud Storage
    check_readable(outputs["submit --emulator train"], job / "logs")
    # No summary.json with the replicas' process groups here: no process naming the job's folder is left
    # (every Ray node's processes but its workers name their temp folder, under the job's).
    assert kit.job_processes(set(), job) == []
