"""The examples' user scripts through `submit --emulator`: the real SDK path to a local Vertex, whose jobs
run on the local backend with the same shipped launcher, 2 replicas x 2 processes each.

The FSDP example only: its four ranks on both replicas write one sharded checkpoint through /gcs into the
emulator's Cloud Storage. The DDP example's template takes the same way here (a script, torchrun, 2 x 2),
and its checks (one model, one save) run on its local-run (tests/local/test_examples.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize("example", ["fsdp"])
def test_an_example_runs_through_the_emulator_two_by_two(
    cli: Any, tmp_path: Path, examples: Any, example: str, host_gcs: Any
) -> None:
    data = tmp_path / "emulator"
    template = examples.ROOT / example / "job.yaml"
    flags = ("--emulator", "--follow", "--procs-per-replica", "2", "--emulator-data-dir", str(data))
    code, out, err = cli("submit", str(template), *flags)
    assert code == 0, out + err
    assert f"job SUCCEEDED: {example}-example" in err
    [job] = list((data / "jobs").iterdir())
    logs = sorted((job / "logs").glob("workerpool*.log"))
    assert "vertexdist_launcher: workerpool1-0 is node 1 of 2, 2 process(es)" in logs[1].read_text()
    getattr(examples, f"check_{example}")(logs, data / "gcs")


def test_procs_per_replica_with_code_run_once_per_machine_is_a_usage_error(
    cli: Any, write_template: Any
) -> None:
    code, _, err = cli("submit", str(write_template(name="once")), "--emulator", "--procs-per-replica", "2")
    assert code == 2
    assert "`launcher: python`, once per machine" in err and "hint: set trainer.launcher: torchrun" in err
