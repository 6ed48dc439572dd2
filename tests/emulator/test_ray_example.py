"""The Ray Train example through `submit --emulator`: the real SDK path to a local Vertex, whose job runs on
the local backend with the same shipped launcher, each replica a Ray node."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_the_ray_train_example_runs_through_the_emulator(cli: Any, tmp_path: Path, examples: Any) -> None:
    data = tmp_path / "emulator"
    template = examples.ROOT / "ray_train" / "job.yaml"
    code, out, err = cli("submit", str(template), "--emulator", "--follow", "--emulator-data-dir", str(data))
    assert code == 0, out + err
    assert "job SUCCEEDED: ray-train-example" in err
    [job] = list((data / "jobs").iterdir())
    head = (job / "logs" / "workerpool0-0.log").read_text()
    worker = (job / "logs" / "workerpool1-0.log").read_text()
    assert "vertexdist_launcher: workerpool0-0 is the Ray head (node 0 of 2)" in head
    assert "vertexdist_launcher: workerpool1-0: the Ray driver on workerpool0-0 succeeded" in worker
    nodes = set(re.findall(r"worker \d/2 on node (\w+): epoch 2", head))
    assert len(nodes) == 2  # both training workers reported their last epoch, one on each node
    [checkpoint] = re.findall(r"^Best checkpoint: (\S+)$", head, re.MULTILINE)
    assert (Path(checkpoint) / "model.pt").is_file()
    assert Path(checkpoint).is_relative_to(data / "gcs")  # the emulator's Cloud Storage
