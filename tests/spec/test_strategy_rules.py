"""What validate says about a DeepSpeed config and Megatron-style parallel sizes named in trainer.args
(vertexdist/spec/strategy_rules.py), on the shipped examples and on broken copies of them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from vertexdist.spec import JobTemplate, check_template, load_template
from vertexdist.spec.strategy_rules import flag_value, job_processes, processes_per_replica

from .conftest import BASE, REPO_ROOT

EXAMPLES = REPO_ROOT / "examples"


def findings(t: JobTemplate, severity: str = "error") -> list[tuple[str, str, str | None]]:
    return [(f.path, f.message, f.hint) for f in check_template(t) if f.severity == severity]


def deepspeed_template(tmp_path: Path, config: str | None, **changes: Any) -> JobTemplate:
    """The shipped DeepSpeed example with its package copied to tmp_path and `config` as bad.json."""
    package = tmp_path / "ds_train"
    shutil.copytree(EXAMPLES / "deepspeed" / "ds_train", package)
    if config is not None:
        (package / "bad.json").write_text(config)
    doc = yaml.safe_load((EXAMPLES / "deepspeed" / "job.yaml").read_text())
    trainer = {**doc["trainer"], "package": str(package), "args": ["--deepspeed_config=bad.json"]}
    trainer.update(changes.pop("trainer", {}))
    doc.update(changes, trainer=trainer)
    return JobTemplate.model_validate(doc, context={"skip_rules": True})


@pytest.mark.parametrize("name", ["deepspeed", "megatron", "pipeline", "tensor_parallel"])
def test_the_shipped_strategy_examples_are_clean(name: str) -> None:
    t = load_template(EXAMPLES / name / "job.yaml")
    assert findings(t) == [] and findings(t, "warning") == []


@pytest.mark.parametrize("config", ["ds_zero2.json", "ds_zero3.json", "ds_zero3_offload.json"])
def test_every_shipped_deepspeed_config_validates_for_the_examples_shape(tmp_path: Path, config: str) -> None:
    text = (EXAMPLES / "deepspeed" / "ds_train" / config).read_text()
    assert findings(deepspeed_template(tmp_path, text)) == []


def test_a_config_that_does_not_parse_is_one_error_with_its_line_and_column(tmp_path: Path) -> None:
    t = deepspeed_template(
        tmp_path, '{"train_micro_batch_size_per_gpu": 8,\n "zero_optimization": {"stage": 2}\n'
    )
    [(path, message, hint)] = findings(t)
    assert path == "trainer.args[0]"
    assert message.endswith("bad.json is not valid JSON: line 3 column 1: Expecting ',' delimiter")
    assert hint == "fix the file"


def test_a_config_that_is_not_an_object_is_an_error(tmp_path: Path) -> None:
    [(_, message, _)] = findings(deepspeed_template(tmp_path, "[1, 2]"))
    assert "is a JSON list, not an object" in message


def test_a_missing_config_would_not_ship_with_the_package(tmp_path: Path) -> None:
    t = deepspeed_template(tmp_path, None, trainer={"args": ["--deepspeed_config", "nope.json"]})
    [(path, message, _)] = findings(t)
    assert path == "trainer.args[1]"  # the value after the flag
    assert "'nope.json' is not in" in message and "does not ship with the code" in message


def test_a_zero_stage_deepspeed_does_not_have_is_an_error(tmp_path: Path) -> None:
    [(_, message, _)] = findings(
        deepspeed_template(tmp_path, json.dumps({"zero_optimization": {"stage": 4}}))
    )
    assert message == "bad.json: zero_optimization.stage is 4; DeepSpeed's ZeRO stages are 0, 1, 2, 3"


def test_train_batch_size_must_be_micro_batch_times_accumulation_times_the_jobs_processes(
    tmp_path: Path,
) -> None:
    config = {"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}
    assert findings(deepspeed_template(tmp_path, json.dumps(config))) == []  # 4 x 2 x (2 replicas x 2)
    three = deepspeed_template(tmp_path / "three", json.dumps(config), replica_count=3)
    [(_, message, hint)] = findings(three)
    assert (
        "train_batch_size 32 is not train_micro_batch_size_per_gpu 4 x gradient_accumulation_steps 2 x"
        in message
    )
    assert "6 processes (3 replicas x 2) = 48" in message
    assert hint == "set train_batch_size to 48, or drop it and DeepSpeed derives it"
    auto = {**config, "train_batch_size": "auto"}  # Hugging Face's placeholder: not ours to check
    assert findings(deepspeed_template(tmp_path / "auto", json.dumps(auto))) == []


def test_no_deepspeed_in_the_requirements_is_a_warning_on_a_prebuilt_image(tmp_path: Path) -> None:
    t = deepspeed_template(tmp_path, "{}", trainer={"requirements": []})
    [(path, message, hint)] = findings(t, "warning")
    assert path == "trainer.requirements" and "do not have DeepSpeed" in message
    assert hint is not None and "deepspeed==" in hint


def megatron(tmp_path: Path, args: list[str], launcher: str = "torchrun") -> JobTemplate:
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    trainer = {"script": str(script), "launcher": launcher, "args": args}
    return JobTemplate.model_validate({**BASE, "trainer": trainer}, context={"skip_rules": True})


def test_the_megatron_examples_sizes_fill_its_jobs_gpus() -> None:
    """TP x PP x DP is the job's processes, TP is one machine's GPUs (tensor parallel stays inside one)."""
    t = load_template(EXAMPLES / "megatron" / "job.yaml")
    [(_, tp)] = [flag_value(t.trainer.args, ["--tensor-model-parallel-size"]) or (0, "")]
    [(_, pp)] = [flag_value(t.trainer.args, ["--pipeline-model-parallel-size"]) or (0, "")]
    assert int(tp) == processes_per_replica(t) == t.accelerator_count == 2
    assert int(pp) == t.replica_count == 2
    assert job_processes(t) % (int(tp) * int(pp)) == 0


def test_parallel_sizes_that_do_not_divide_the_jobs_processes_are_an_error(tmp_path: Path) -> None:
    # BASE: 2 x a2-highgpu-4g, 8 processes.
    assert (
        findings(megatron(tmp_path, ["--tensor-model-parallel-size=4", "--pipeline-model-parallel-size=2"]))
        == []
    )
    [(path, message, hint)] = findings(
        megatron(tmp_path, ["--tensor-model-parallel-size", "4", "--pipeline-model-parallel-size=3"])
    )
    assert path == "trainer.args[1]"
    assert message.startswith("tensor parallel 4 x pipeline parallel 3 = 12 does not divide the job's 8")
    assert hint == "pick sizes whose product is one of 1, 2, 4, 8, or change the job's shape"
    [(_, message, _)] = findings(megatron(tmp_path, ["--pipeline-model-parallel-size=3"]))
    assert "tensor parallel 1 x pipeline parallel 3 = 3" in message


def test_a_size_that_is_not_a_number_is_an_error(tmp_path: Path) -> None:
    [(_, message, _)] = findings(megatron(tmp_path, ["--tensor-model-parallel-size=two"]))
    assert message == "--tensor-model-parallel-size must be a whole number of at least 1"


def test_tensor_parallel_across_machines_is_a_warning(tmp_path: Path) -> None:
    t = megatron(tmp_path, ["--tensor-model-parallel-size=8"])
    assert findings(t) == []
    [(_, message, _)] = findings(t, "warning")
    assert message.startswith("tensor parallel 8 is more than the 4 processes of one machine")


def test_the_python_launcher_runs_one_process_per_machine(tmp_path: Path) -> None:
    t = megatron(tmp_path, ["--tensor-model-parallel-size=4"], launcher="python")
    assert job_processes(t) == 2
    [(_, message, _)] = [f for f in findings(t) if "tensor parallel" in f[1]]
    assert "= 4 does not divide the job's 2 processes (2 replicas x 1)" in message


def test_validate_prints_one_line_for_a_broken_config_and_no_traceback(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES / "deepspeed", tmp_path / "deepspeed")
    (tmp_path / "deepspeed" / "ds_train" / "ds_zero2.json").write_text('{"zero_optimization": {"stage": 2}\n')
    result = subprocess.run(
        [sys.executable, "-m", "vertexdist", "validate", str(tmp_path / "deepspeed" / "job.yaml")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    out = result.stdout + result.stderr
    assert "Traceback" not in out
    [line] = [line for line in out.splitlines() if "ds_zero2.json is not valid JSON" in line]
    assert line.startswith(f"{tmp_path / 'deepspeed' / 'job.yaml'}:") and "line 2 column 1" in line
