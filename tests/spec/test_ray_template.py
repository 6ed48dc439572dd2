"""`trainer.launcher: ray` in a template: what validate says about it and what render sends to Vertex."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from vertexdist.container.ensure import build_args_for
from vertexdist.render import render_job_spec
from vertexdist.shipped.vertexdist_launcher.ray_args import RAY_TESTED
from vertexdist.spec import JobTemplate, check_template

from .conftest import BASE, REPO_ROOT

RAY = RAY_TESTED


def template(tmp_path: Path, **trainer: Any) -> JobTemplate:
    script = tmp_path / "driver.py"
    script.write_text("import ray\nray.init()\n")
    data = {**BASE, "trainer": {"script": str(script), "launcher": "ray", "requirements": [RAY], **trainer}}
    return JobTemplate.model_validate(data, context={"skip_rules": True})


def findings(t: JobTemplate, severity: str) -> list[tuple[str, str, str | None]]:
    return [(f.path, f.message, f.hint) for f in check_template(t) if f.severity == severity]


def test_a_ray_template_with_ray_in_its_requirements_is_clean(tmp_path: Path) -> None:
    t = template(tmp_path)
    assert findings(t, "error") == [] and findings(t, "warning") == []
    # No DDP restart warning either: a lost node ends a Ray job, nothing hangs.
    no_restart = JobTemplate.model_validate(
        {**BASE, "restart_job_on_worker_restart": False, "trainer": dict(t.trainer.model_dump(mode="json"))},
        context={"skip_rules": True},
    )
    assert findings(no_restart, "warning") == []


def test_torchrun_options_are_errors_with_ray(tmp_path: Path) -> None:
    errors = findings(template(tmp_path, nproc_per_node=2, max_restarts=1), "error")
    assert [path for path, _, _ in errors] == ["trainer.nproc_per_node", "trainer.max_restarts"]
    assert "ScalingConfig(num_workers=...)" in errors[0][1]
    assert "FailureConfig(max_failures=N)" in (errors[1][2] or "")


@pytest.mark.parametrize("requirement", ["ray", "ray[train,tune]==2.60.0", "Ray>=2.40", "ray [tune] ~= 2.5"])
def test_any_ray_requirement_counts(tmp_path: Path, requirement: str) -> None:
    assert findings(template(tmp_path, requirements=["torch", requirement]), "warning") == []


@pytest.mark.parametrize("requirements", [[], ["rayon"], ["ray-lightning==0.3"], ["pandas"]])
def test_without_ray_in_the_requirements_validate_warns_and_names_the_tested_ray(
    tmp_path: Path, requirements: list[str]
) -> None:
    [(path, message, hint)] = findings(template(tmp_path, requirements=requirements), "warning")
    assert path == "trainer.requirements" and "needs Ray on every replica" in message
    assert f"'{RAY}'" in (hint or "")


def test_render_runs_the_launchers_ray_mode_with_the_module_and_its_args(tmp_path: Path) -> None:
    t = template(tmp_path, args=["--epochs", "3"])
    for pool in render_job_spec(t)["workerPoolSpecs"]:
        code = pool["pythonPackageSpec"]
        assert code["pythonModule"] == "vertexdist_launcher"
        assert code["args"] == ["ray", "--", "-m", "aiplatform_custom_trainer_script.task", "--epochs", "3"]


def test_a_built_image_runs_the_ray_mode_as_its_command_and_gets_ray_installed(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    build = {"repository": "us-central1-docker.pkg.dev/vertexdist-demo/trainers", "context": str(tmp_path),
             "dockerfile": str(tmp_path / "Dockerfile")}  # fmt: skip
    data = {**BASE, "build": build, "trainer": {"launcher": "ray", "requirements": [RAY], "args": ["--x"]}}
    t = JobTemplate.model_validate(data)
    for pool in render_job_spec(t)["workerPoolSpecs"]:
        container = pool["containerSpec"]
        assert container["command"] == [
            "python",
            "-m",
            "vertexdist_launcher",
            "ray",
            "--",
            "-m",
            "trainer_pkg.task",
        ]
        assert container["args"] == ["--x"]
    # The project's Dockerfile installs PIP_REQUIREMENTS in its dependency layer: Ray goes into the image.
    assert build_args_for(t)["PIP_REQUIREMENTS"] == RAY


def test_the_ray_extra_pins_the_ray_the_launcher_names() -> None:
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    assert f'ray = ["{RAY}"' in pyproject  # the extra's first entry: the Ray the launcher names
    # `make test` installs it: the extras of the Makefile's `pip install -e ".[...]"` include ray.
    extras = re.search(r'-e "\.\[([a-z,]+)\]"', (REPO_ROOT / "Makefile").read_text())
    assert extras is not None and "ray" in extras.group(1).split(",")
