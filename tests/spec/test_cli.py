"""The validate, render, schema and machines commands, run as a user runs them (a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vertexdist.cli.validate import format_github, format_text
from vertexdist.errors import Problem

from .conftest import REPO_ROOT, WriteTemplate

# Runs the CLI and, at exit, reports every heavy module that got imported.
_RUN_AND_REPORT = (
    "import sys, atexit\n"
    "atexit.register(lambda: print('HEAVY=' + ','.join(sorted(m for m in sys.modules"
    " if m in ('torch', 'ray') or m.startswith(('torch.', 'ray.', 'google.cloud.aiplatform')))),"
    " file=sys.stderr))\n"
    "from vertexdist.cli.main import run\n"
    "run(sys.argv[1:])\n"
)


def vertexdist(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_GCE_CHECK": "true"}
    return subprocess.run(
        [sys.executable, "-c", _RUN_AND_REPORT, *map(str, args)],
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT, env=env,
    )  # fmt: skip


def heavy_modules(result: subprocess.CompletedProcess[str]) -> str:
    [line] = [line for line in result.stderr.splitlines() if line.startswith("HEAVY=")]
    return line.removeprefix("HEAVY=")


@pytest.mark.parametrize(
    "args",
    [("validate", "job_templates"), ("render", "job_templates/a2-4g-x2.yaml"), ("--help",),
     ("render", "job_templates/a2-4g-x2.yaml", "--request", "--format", "json"), ("machines",),
     ("estimate", "job_templates/a2-ultragpu-8g-rs.yaml", "--params", "1.3B"),
     ("validate", "examples/ray_train/job.yaml", "examples/ray_tune/job.yaml"),
     ("render", "examples/ray_train/job.yaml", "--request")],
)  # fmt: skip
def test_light_commands_never_import_the_sdk_or_torch(args: tuple[str, ...]) -> None:
    result = vertexdist(*args)
    assert result.returncode == 0, result.stderr
    assert heavy_modules(result) == ""


def test_validate_shipped_templates_exit_0() -> None:
    result = vertexdist("validate", "job_templates/")
    assert result.returncode == 0
    assert "checked" not in result.stderr
    # The summary is stdout: `2>/dev/null` does not hide it (issue 36).
    assert result.stdout.splitlines()[-1].endswith("templates checked: 0 errors, 0 warnings")


def test_validate_the_repository_checks_its_templates_and_says_what_it_skipped() -> None:
    # Issue 27 item 9: `vertexdist validate .` read cloudbuild.yaml as a template.
    result = vertexdist("validate", ".")
    assert result.returncode == 0, result.stdout
    shipped = len(list(REPO_ROOT.glob("job_templates/*.yaml")) + list(REPO_ROOT.glob("examples/*/job.yaml")))
    assert result.stdout == f"{shipped} templates checked: 0 errors, 0 warnings\n"
    [skipped] = [line for line in result.stderr.splitlines() if line.startswith("skipped")]
    assert "cloudbuild.yaml" in skipped and "not job templates" in skipped


def test_validate_errors_exit_1_with_file_line_col_and_hint(write_template: WriteTemplate) -> None:
    path = write_template(
        text="display_name: x\nproject: vertexdist-demo\nstaging_bucket: gs://bkt/s\nmachine_typ: x\n"
    )
    result = vertexdist("validate", path)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"{path}:4:1: machine_typ: unknown field 'machine_typ'",
        "    hint: did you mean `machine_type`?",
        "1 template checked: 1 error, 0 warnings",
    ]
    assert "Traceback" not in result.stderr


def test_validate_warnings_exit_0_and_say_warning(write_template: WriteTemplate) -> None:
    path = write_template({"restart_job_on_worker_restart": False})
    result = vertexdist("validate", path)
    assert result.returncode == 0
    assert (
        result.stdout.startswith(f"{path}:") and ": restart_job_on_worker_restart: warning: " in result.stdout
    )


def test_validate_missing_path_exit_2(tmp_path: Path) -> None:
    result = vertexdist("validate", tmp_path / "nope")
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "no such file or folder" in result.stderr


def test_validate_empty_folder_exit_2(tmp_path: Path) -> None:
    assert vertexdist("validate", tmp_path).returncode == 2


def test_validate_bad_format_exit_2() -> None:
    assert vertexdist("validate", "job_templates", "--format", "xml").returncode == 2


def test_validate_json(write_template: WriteTemplate) -> None:
    path = write_template({"replica_count": 0})
    result = vertexdist("validate", path, "--format", "json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["errors"] == 1 and report["warnings"] == 0 and report["files"] == [str(path)]
    [problem] = report["problems"]
    assert problem["path"] == "replica_count" and problem["severity"] == "error" and problem["line"] > 0


def test_validate_github_annotations(write_template: WriteTemplate) -> None:
    path = write_template({"replica_count": 0})
    result = vertexdist("validate", path, "--format", "github")
    assert result.returncode == 1
    line, summary = result.stdout.splitlines()
    assert summary == "1 template checked: 1 error, 0 warnings"
    assert line.startswith(f"::error file={path},line=") and ",title=replica_count::" in line


def test_text_and_github_formats() -> None:
    problem = Problem("a,b.yaml", 3, 7, "labels.x", "bad: value\nsecond", "fix it", "warning")
    assert format_text(problem) == "a,b.yaml:3:7: labels.x: warning: bad: value\nsecond\n    hint: fix it"
    assert format_github(problem) == (
        "::warning file=a%2Cb.yaml,line=3,col=7,title=labels.x::bad: value%0Asecond%0Ahint: fix it"
    )


@pytest.mark.parametrize("bad", ["", "- a\n", "x: !!python/object/apply:os.system ['true']\n", "a: [\n"])
def test_broken_files_one_line_exit_1_no_traceback(write_template: WriteTemplate, bad: str) -> None:
    result = vertexdist("validate", write_template(text=bad))
    assert result.returncode == 1
    *problems, summary = [line for line in result.stdout.splitlines() if not line.startswith("    hint:")]
    assert len(problems) == 1 and summary == "1 template checked: 1 error, 0 warnings"
    assert "Traceback" not in result.stderr + result.stdout


def test_render_yaml_is_the_custom_job_spec() -> None:
    result = vertexdist("render", "job_templates/a2-4g-x2.yaml")
    assert result.returncode == 0, result.stderr
    spec = yaml.safe_load(result.stdout)
    assert [p["replicaCount"] for p in spec["workerPoolSpecs"]] == [1, 1]
    assert "&id" not in result.stdout  # no YAML anchors: gcloud reads plain YAML
    assert all("_" not in key for key in spec)  # gcloud: "keys with underscore are invalid"


def test_render_request_json() -> None:
    result = vertexdist("render", "job_templates/cpu-small.yaml", "--request", "--format", "json")
    request = json.loads(result.stdout)
    assert request["parent"] == "projects/vertexdist-demo/locations/us-central1"
    assert request["trainingPipeline"]["trainingTaskInputs"]["workerPoolSpecs"][0]["machineSpec"] == {
        "machineType": "n1-standard-4"
    }


def test_render_masks_secrets(write_template: WriteTemplate) -> None:
    path = write_template({"trainer": {"env": {"HF_TOKEN": "hf_secret_value", "NCCL_DEBUG": "INFO"}}})
    result = vertexdist("render", path)
    assert "hf_secret_value" not in result.stdout and "INFO" in result.stdout


def test_render_bad_template_exit_1(write_template: WriteTemplate) -> None:
    result = vertexdist("render", write_template({"accelerator_count": 3}))
    assert result.returncode == 1
    assert (
        "accelerator_count" in result.stderr and "hint:" in result.stderr and "Traceback" not in result.stderr
    )


def test_render_missing_file_exit_2(tmp_path: Path) -> None:
    assert vertexdist("render", tmp_path / "nope.yaml").returncode == 2


def test_schema_is_json_schema_of_the_template() -> None:
    result = vertexdist("schema")
    schema = json.loads(result.stdout)
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert schema["additionalProperties"] is False
    assert {"display_name", "staging_bucket"} <= set(schema["required"])
    assert "project" not in schema["required"]  # --project or GOOGLE_CLOUD_PROJECT may name it
    assert "timeout" in schema["properties"] and "trainer" in schema["properties"]
    trainer = schema["$defs"]["TrainerSpec"]["properties"]
    assert (
        trainer["launcher"]["enum"] == ["python", "torchrun", "ray"]
        and trainer["launcher"]["default"] == "python"
    )
    assert {"nproc_per_node", "max_restarts"} <= set(trainer)


def test_schema_accepts_every_shipped_template_and_rejects_unknown_keys() -> None:
    import jsonschema

    schema = json.loads(vertexdist("schema").stdout)
    for path in [
        *sorted((REPO_ROOT / "job_templates").glob("*.yaml")),
        *REPO_ROOT.glob("examples/*/job.yaml"),
    ]:
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
    good = yaml.safe_load((REPO_ROOT / "job_templates" / "cpu-small.yaml").read_text())
    for bad in (
        {**good, "machine_typ": "x"},
        {**good, "timeout": "90 minutes"},
        {**good, "replica_count": 0},
        {**good, "trainer": {"launcher": "mpirun"}},
        {**good, "trainer": {"launcher": "torchrun", "nproc_per_node": 0}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_machines_table_and_filter() -> None:
    result = vertexdist("machines", "--accelerator", "NVIDIA_L4")
    assert result.returncode == 0
    rows = [line.split() for line in result.stdout.splitlines()[1:] if line.startswith("g2")]
    assert rows[[r[0] for r in rows].index("g2-standard-24")][:3] == ["g2-standard-24", "NVIDIA_L4", "2"]
    assert all(
        line.startswith(("g2", "machine_type", "source:")) for line in result.stdout.splitlines() if line
    )


def test_machines_json_and_unknown_accelerator() -> None:
    data = json.loads(vertexdist("machines", "--format", "json").stdout)
    assert data["source"].startswith("https://") and len(data["machines"]) > 70
    result = vertexdist("machines", "--accelerator", "A100")
    assert result.returncode == 2 and "'NVIDIA_TESLA_A100'?" in result.stderr


def _big_arg_template(write_template: WriteTemplate) -> Path:
    path = write_template({"replica_count": 1})
    with path.open("a") as handle:
        handle.write("trainer:\n  args:\n  - " + "x" * (50 * 1024 * 1024) + "\n")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("command", ["validate", "render"])
def test_a_50_mb_argument_is_refused_at_load(write_template: WriteTemplate, command: str) -> None:
    # Before: validate passed it and render spent 94 s writing it out (the helper's timeout is 60 s).
    result = vertexdist(command, _big_arg_template(write_template))
    assert result.returncode == 1
    out = result.stdout + result.stderr
    assert "trainer.args[0]" in out and "50.0 MiB" in out and "128.0 KiB" in out
    assert len(out) < 2000


def test_an_alias_bomb_prints_one_short_problem(write_template: WriteTemplate) -> None:
    lines = ['  a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    text = (
        "display_name: x\nproject: vertexdist-demo\nanchors:\n"
        + "\n".join(lines)
        + "\ntrainer:\n  args: *a8\n"
    )
    result = vertexdist("validate", write_template(text=text))
    assert result.returncode == 1
    assert len(result.stdout) < 1000 and "YAML aliases" in result.stdout


def test_a_file_with_thousands_of_problems_shows_a_screenful_and_a_count(
    write_template: WriteTemplate,
) -> None:
    text = "display_name: x\nproject: vertexdist-demo\nstaging_bucket: gs://bkt/s\ntrainer:\n  args: ["
    text += ", ".join(["[1, [2, [3]]]"] * 5000) + "]\n"
    path = write_template(text=text)
    result = vertexdist("validate", path)
    assert result.returncode == 1
    *problem_lines, summary = [line for line in result.stdout.splitlines() if not line.startswith("    ")]
    assert len(problem_lines) == 21
    assert problem_lines[-1] == f"{path}: ... and 4980 more problems"
    assert summary == "1 template checked: 5000 errors, 0 warnings"
    as_json = json.loads(vertexdist("validate", path, "--format", "json").stdout)
    assert as_json["errors"] == 5000 and len(as_json["problems"]) == 5000


def test_validate_reports_a_looping_link_in_a_folder(tmp_path: Path, write_template: WriteTemplate) -> None:
    write_template(name="good.yaml")
    (tmp_path / "loop.yaml").symlink_to("loop.yaml")
    result = vertexdist("validate", tmp_path)
    assert result.returncode == 1
    assert f"{tmp_path / 'loop.yaml'}:1:1: is a symlink loop" in result.stdout
    assert "2 templates checked" in result.stdout
    single = vertexdist("render", tmp_path / "loop.yaml")
    assert single.returncode == 2 and "symlink loop" in single.stderr and "no such" not in single.stderr
