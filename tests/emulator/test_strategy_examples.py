"""The strategy examples through `submit --emulator`: the real SDK path to a local Vertex, whose jobs run on
the local backend with the same shipped launcher, 2 replicas x 2 processes each. Where tests/local runs a
schedule or a ZeRO stage, these run the other one (ZeRO-2, GPipe), so each is run once in the suite. The
tensor-parallel and Horovod-to-DDP examples run once too, through local-run (tests/local): their templates
are the pipeline's (a script, torchrun, 2 x 2), whose way through the emulator is the GPipe job here, and
their checks (every rank's result) read the same logs on either path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from vertexdist.jobs.run_record import RECORD_FOLDER

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]


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


def submit(cli: Any, template: Path, data: Path, display_name: str) -> list[Path]:
    """Run the job through the emulator -> its replicas' logs."""
    flags = ("--emulator", "--follow", "--procs-per-replica", "2", "--emulator-data-dir", str(data))
    code, out, err = cli("submit", str(template), *flags)
    assert code == 0, out + err
    assert f"job SUCCEEDED: {display_name}" in err
    [job] = list((data / "jobs").iterdir())
    logs = sorted((job / "logs").glob("workerpool*.log"))
    assert "vertexdist_launcher: workerpool1-0 is node 1 of 2, 2 process(es)" in logs[1].read_text()
    return logs


def output_folder(data: Path, display_name: str) -> Path:
    """The job's output folder in the emulator's Cloud Storage (AIP_MODEL_DIR etc. are under it). Its run
    record sits beside it (`vertexdist-records/`), and shows in this file tree once the storage emulator has
    mirrored it there, which may come before or after the job's end."""
    base = data / "gcs" / "vertexdist-demo/staging/vertexdist/output" / display_name
    [output] = [folder for folder in base.iterdir() if folder.name != RECORD_FOLDER]
    return output


def test_the_shipped_deepspeed_zero2_job_partitions_the_optimizer_and_checkpoints(
    cli: Any, tmp_path: Path, examples: Any
) -> None:
    """The shipped template as it is (ZeRO-2, 8 steps, checkpoints at 4 and 8): every rank its quarter of
    the optimizer, every rank's shard in the job's checkpoint folder. One job: resuming a DeepSpeed
    checkpoint bit for bit is tests/local's ZeRO-3 pair of runs, and `submit --resume-from JOB` is
    tests/emulator/test_output_folders.py (with the bundled trainer)."""
    data = tmp_path / "emulator"
    logs = submit(cli, examples.ROOT / "deepspeed" / "job.yaml", data, "deepspeed-example")
    examples.check_deepspeed(logs, stage=2)
    checkpoints = output_folder(data, "deepspeed-example") / "checkpoints"
    for tag in ("step4", "step8"):
        examples.deepspeed_checkpoint(checkpoints, tag, stage=2)
    assert (checkpoints / "latest").read_text().strip() == "step8"


def test_the_pipeline_with_the_gpipe_schedule(cli: Any, tmp_path: Path, examples: Any) -> None:
    args = ["--schedule=gpipe", "--microbatches=4", "--steps=5"]
    template = variant(examples.ROOT / "pipeline", tmp_path / "template", args)
    logs = submit(cli, template, tmp_path / "emulator", "pipeline-example")
    output = output_folder(tmp_path / "emulator", "pipeline-example")
    examples.check_pipeline(logs, output / "model", schedule="gpipe")
