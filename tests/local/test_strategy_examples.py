"""The strategy examples (DeepSpeed ZeRO, pipeline, 2-D tensor parallel + FSDP, Horovod moved to DDP) through
`local-run`, 2 replicas x 2 processes each: real processes, real torch.distributed over gloo, and what
each rank computed checked against the same model trained unsplit in this process.

The DeepSpeed job comes from the job's requirements environment (trainer.requirements: deepspeed, found
installed by the `strategies` extra); its first run in a venv builds DeepSpeed's CPU op once (cached per
venv: tests/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

OUTPUT = Path("gcs/vertexdist-demo/staging/vertexdist/output")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One working folder for the module: the packages and the DeepSpeed job environment are cached there."""
    return tmp_path_factory.mktemp("strategies")


def local_run(template: Path, out: Path, *flags: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vertexdist", "local-run", str(template), "--out", str(out), *flags],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=540,
    )


def variant(example: Path, folder: Path, args: list[str]) -> Path:
    """The example's template with other trainer args, written to `folder` (its code named by full path)."""
    doc: dict[str, Any] = yaml.safe_load((example / "job.yaml").read_text())
    trainer = doc["trainer"]
    for key in ("script", "package"):
        if key in trainer:
            trainer[key] = str(example / trainer[key])
    trainer["args"] = args
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def logs(run: Path) -> list[Path]:
    return sorted((run / "logs").glob("workerpool*.log"))


def job_folder(run: Path, display_name: str) -> Path:
    [folder] = list((run / OUTPUT / display_name).iterdir())
    return folder


@pytest.fixture(scope="module")
def deepspeed_runs(workdir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The example on ZeRO-3 (8 steps, checkpoints at 4 and 8), then the same job resumed with
    `--resume-from` after its checkpoint dir was set back to step 4 (`latest` as a job that died between
    the two checkpoints leaves it): the resumed run redoes steps 5-8 from DeepSpeed's checkpoint, every rank
    loading its own shard of the model and of the optimizer. (The shipped ZeRO-2 job runs once, through
    `submit --emulator`: tests/emulator/test_strategy_examples.py.)"""
    base = tmp_path_factory.mktemp("deepspeed")
    args = ["--deepspeed_config=ds_zero3.json", "--steps=8", "--checkpoint-every=4"]
    example = Path(__file__).resolve().parents[2] / "examples" / "deepspeed"
    template = variant(example, base / "template", args)
    first = local_run(template, base / "first", cwd=workdir)
    assert first.returncode == 0, first.stdout + first.stderr
    checkpoints = job_folder(base / "first", "deepspeed-example") / "checkpoints"
    assert (checkpoints / "latest").read_text().strip() == "step8"
    (checkpoints / "latest").write_text("step4")
    resumed = local_run(template, base / "resumed", "--resume-from", str(base / "first"), cwd=workdir)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    return base / "first", base / "resumed"


def test_deepspeed_zero3_partitions_the_parameters_too_over_four_processes(
    deepspeed_runs: tuple[Path, Path], examples: Any
) -> None:
    first, _ = deepspeed_runs
    examples.check_deepspeed(logs(first), stage=3)
    checkpoints = job_folder(first, "deepspeed-example") / "checkpoints"
    for tag in ("step4", "step8"):
        examples.deepspeed_checkpoint(checkpoints, tag, stage=3)


def test_deepspeed_resumes_from_its_checkpoint_to_the_same_model_bit_for_bit(
    deepspeed_runs: tuple[Path, Path], examples: Any
) -> None:
    first, resumed = deepspeed_runs
    lines = examples.lines(logs(resumed))
    [note] = [line for line in lines if line.startswith("Resumed from ")]
    assert "/checkpoints/step4/" in note and note.endswith(" at step 4"), note
    assert examples.check_deepspeed(logs(resumed), stage=3) == examples.check_deepspeed(logs(first), stage=3)
    # The resumed run wrote into the first run's folder: its step8 again, and `latest` moved on.
    checkpoints = job_folder(first, "deepspeed-example") / "checkpoints"
    assert (checkpoints / "latest").read_text().strip() == "step8"


def test_a_deepspeed_config_that_does_not_parse_is_one_clear_line_before_anything_runs(
    workdir: Path, tmp_path: Path, examples: Any
) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text('{"train_micro_batch_size_per_gpu": 8,\n "zero_optimization": {"stage": 2}\n')
    template = variant(examples.ROOT / "deepspeed", tmp_path, [f"--deepspeed_config={bad}"])
    result = local_run(template, tmp_path / "run", cwd=workdir)  # the template's checks refuse it
    assert result.returncode != 0 and "Traceback" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if "is not valid JSON" in line]
    assert line.startswith(f"error: {template}:13:5: trainer.args[0]: ") and line.endswith(
        f"the DeepSpeed config {bad} is not valid JSON: line 3 column 1: Expecting ',' delimiter"
    )
    assert not (tmp_path / "run" / "logs").exists()
    # The script on its own (no vertexdist, no torchrun) says the same in one line, before DeepSpeed starts.
    script = subprocess.run(
        [sys.executable, "-m", "ds_train.train", f"--deepspeed_config={bad}"],
        cwd=examples.ROOT / "deepspeed",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert script.returncode == 1 and "Traceback" not in script.stderr
    assert script.stderr.strip().splitlines()[-1] == (
        f"error: {bad}:3:1: the DeepSpeed config is not valid JSON: Expecting ',' delimiter"
    )


def test_the_pipeline_runs_one_stage_per_process_across_both_machines_1f1b(
    workdir: Path, tmp_path: Path, examples: Any, host_gcs: Any
) -> None:
    result = local_run(examples.ROOT / "pipeline" / "job.yaml", tmp_path / "run", cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr
    model_dir = job_folder(tmp_path / "run", "pipeline-example") / "model"
    examples.check_pipeline(logs(tmp_path / "run"), model_dir, schedule="1f1b")


def test_tensor_parallel_inside_a_machine_and_fsdp_across_machines(
    workdir: Path, tmp_path: Path, examples: Any
) -> None:
    result = local_run(examples.ROOT / "tensor_parallel" / "job.yaml", tmp_path / "run", cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr
    examples.check_tensor_parallel(logs(tmp_path / "run"))


def test_the_horovod_script_moved_to_ddp_runs_and_averages_its_metric(
    workdir: Path, tmp_path: Path, examples: Any, host_gcs: Any
) -> None:
    result = local_run(examples.ROOT / "horovod_to_ddp" / "job.yaml", tmp_path / "run", cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr
    examples.check_horovod_to_ddp(logs(tmp_path / "run"), tmp_path / "run" / "gcs")
