"""The user scripts of examples/ (torchrun-style DDP and FSDP2, no vertexdist in them) through `local-run`,
2 replicas x 2 processes each: real processes, real torch.distributed over gloo. They write their model
through /gcs, as on Vertex: it lands in the run folder, and the host's own /gcs is never touched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One working folder for the module, so the installed-package cache is shared between runs."""
    return tmp_path_factory.mktemp("examples")


def local_run(template: Path, out: Path, *flags: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vertexdist", "local-run", str(template), "--out", str(out), *flags],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=170,
    )


def test_the_ddp_example_runs_one_process_per_gpu_of_its_template(
    workdir: Path, tmp_path: Path, examples: Any, host_gcs: Any
) -> None:
    # No --procs-per-replica: the template's 2 GPUs per node make 2 processes per replica, as on Vertex.
    result = local_run(examples.ROOT / "ddp" / "job.yaml", tmp_path / "run", cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr
    examples.check_ddp(sorted((tmp_path / "run" / "logs").glob("workerpool*.log")), tmp_path / "run" / "gcs")


def test_the_fsdp_example_shards_the_model_over_four_processes(
    workdir: Path, tmp_path: Path, examples: Any, host_gcs: Any
) -> None:
    template = examples.ROOT / "fsdp" / "job.yaml"
    result = local_run(template, tmp_path / "run", "--procs-per-replica", "2", cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr
    examples.check_fsdp(sorted((tmp_path / "run" / "logs").glob("workerpool*.log")), tmp_path / "run" / "gcs")


def test_procs_per_replica_is_a_usage_error_for_code_run_once_per_machine(
    workdir: Path, tmp_path: Path, examples: Any
) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('hello')\n")
    doc = yaml.safe_load((examples.ROOT / "ddp" / "job.yaml").read_text())
    doc["trainer"] = {"script": str(script)}  # launcher: python, the default
    template = tmp_path / "job.yaml"
    template.write_text(yaml.safe_dump(doc))
    result = local_run(template, tmp_path / "run", "--procs-per-replica", "2", cwd=workdir)
    assert result.returncode == 2
    assert "`launcher: python`, once per machine" in result.stderr and "Traceback" not in result.stderr
    assert "hint: set trainer.launcher: torchrun" in result.stderr
    assert not (tmp_path / "run").exists()
