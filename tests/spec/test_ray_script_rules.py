"""`validate` on a `launcher: ray` script written for an older Ray (issue 46): Ray Train's RunConfig passed to
a Tuner, and `train.report` in a Tune function, both as the chapter wrote them; Ray 2.60's names pass, and
so does Ray Train's own use of both inside a trainer."""

from __future__ import annotations

from pathlib import Path

import yaml

from vertexdist.spec.loader import inspect_file
from vertexdist.spec.ray_script_rules import ray_api_mistakes

CHAPTER_TUNE = """\
from ray import train, tune
from ray.train import RunConfig

def objective(config):
    for epoch in range(3):
        train.report({"accuracy": 0.5})  # Ray Train's report, in a Tune function

tuner = tune.Tuner(
    objective,
    param_space={"lr": tune.loguniform(1e-4, 0.3)},
    run_config=RunConfig(storage_path="gs://my-bucket/ray-results"),
)
"""
RAY_260_TUNE = """\
from ray import tune

def objective(config):
    tune.report({"accuracy": 0.5})  # train.report would be wrong here

tuner = tune.Tuner(objective, run_config=tune.RunConfig(storage_path="gs://my-bucket/ray-results"))
"""
TRAIN_IN_TUNE = """\
import ray.train
from ray import tune
from ray.train.torch import TorchTrainer

def loop(config):
    ray.train.report({"loss": 0.1})  # right: inside a trainer's workers

trainer = TorchTrainer(loop, run_config=ray.train.RunConfig(name="inner"))
tuner = tune.Tuner(trainer, run_config=ray.train.RunConfig(storage_path="gs://b/r"))
"""


def test_the_chapter_s_tune_code_is_found_and_ray_2_60_s_passes() -> None:
    assert ray_api_mistakes(CHAPTER_TUNE) == [(6, "report"), (11, "runconfig")]
    assert ray_api_mistakes(RAY_260_TUNE) == []
    assert ray_api_mistakes("from ray.train import RunConfig, report\nreport({})\n") == []  # no Tuner


def test_inside_a_trainer_only_the_tuner_s_own_runconfig_is_found() -> None:
    assert ray_api_mistakes(TRAIN_IN_TUNE) == [(9, "runconfig")]


def _job(tmp_path: Path, script: str, launcher: str = "ray") -> Path:
    (tmp_path / "tune.py").write_text(script)
    template = {
        "display_name": "chapter-tune",
        "project": "my-project",
        "staging_bucket": "gs://my-bucket/staging",
        "trainer": {"script": "tune.py", "launcher": launcher, "requirements": ["ray[train,tune]==2.60.0"]},
        "replica_count": 2,
        "timeout": "1h",
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(template))
    return path


def test_validate_warns_on_the_chapter_s_tune_script(tmp_path: Path) -> None:
    template, problems = inspect_file(_job(tmp_path, CHAPTER_TUNE))
    assert template is not None  # warnings, not errors
    report, runconfig = problems
    assert {p.severity for p in problems} == {"warning"} and {p.path for p in problems} == {"trainer.script"}
    assert report.message.startswith("tune.py:6 calls ray.train.report in a function passed to Ray Tune")
    assert report.hint is not None and report.hint.startswith("call tune.report({...})")
    assert runconfig.message.startswith("tune.py:11 passes Ray Train's RunConfig to a Tuner")
    assert "'str' object has no attribute 'value'" in runconfig.message
    assert runconfig.hint is not None and "tune.RunConfig(" in runconfig.hint
    assert inspect_file(_job(tmp_path, RAY_260_TUNE))[1] == []
