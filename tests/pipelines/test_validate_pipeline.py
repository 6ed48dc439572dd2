"""`vertexdist validate` of a pipeline file: it compiles, and each training step's template is checked as a
template is, the problem naming the template's file/line/field and the step's line in the pipeline file."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from vertexdist.pipelines.check import check_pipeline, is_pipeline_file

TEMPLATES = Path(__file__).resolve().parents[2] / "job_templates"

PIPELINE = """
from kfp import dsl
from vertexdist.pipelines import training_step

@dsl.pipeline(name="one-step")
def one_step():
    training_step({template!r})
"""


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def test_a_sound_pipeline_has_no_problems(tmp_path: Path) -> None:
    pipeline = _write(tmp_path, "good.py", PIPELINE.format(template=str(TEMPLATES / "cpu-small.yaml")))
    assert is_pipeline_file(pipeline)
    assert [p for p in check_pipeline(pipeline) if p.severity == "error"] == []


def test_a_broken_template_is_named_with_its_line_field_and_step(tmp_path: Path) -> None:
    text = (TEMPLATES / "cpu-small.yaml").read_text().replace("replica_count: 2", "replica_count: two")
    template = _write(tmp_path, "bad.yaml", text)
    pipeline = _write(tmp_path, "bad_pipe.py", PIPELINE.format(template=str(template)))
    errors = [p for p in check_pipeline(pipeline) if p.severity == "error"]
    line = text.splitlines().index("replica_count: two") + 1
    assert [(p.file, p.line, p.path) for p in errors] == [(str(template), line, "replica_count")]
    assert f"bad_pipe.py:7: training_step({str(template)!r})" in errors[0].message


def test_a_pipeline_that_does_not_compile_is_named_at_its_line(tmp_path: Path) -> None:
    pipeline = _write(tmp_path, "broken.py", "from kfp import dsl\n\nraise ValueError('nope')\n")
    [problem] = check_pipeline(pipeline)
    assert (problem.file, problem.line, problem.severity) == (str(pipeline), 3, "error")
    assert "does not compile" in problem.message and "nope" in problem.message
    syntax = _write(tmp_path, "syntax.py", "from kfp import dsl\n\nx = 1 +\n")
    assert [(p.file, p.line) for p in check_pipeline(syntax)] == [(str(syntax), 3)]


def test_a_compiled_spec_is_checked_and_says_its_templates_are_not(tmp_path: Path) -> None:
    spec = _write(tmp_path, "spec.yaml", "pipelineInfo: {name: p}\nroot: {dag: {tasks: {}}}\n")
    assert is_pipeline_file(spec) and not is_pipeline_file(TEMPLATES / "cpu-small.yaml")
    assert check_pipeline(spec) == []
    launcher = "{executors: {e: {container: {command: [python3, -m, x.custom_job.launcher]}}}}"
    step = _write(tmp_path, "step.yaml", spec.read_text() + f"deploymentSpec: {launcher}\n")
    assert [p.severity for p in check_pipeline(step)] == ["note"]
    broken = _write(tmp_path, "broken.yaml", "pipelineInfo: {name: p}\nroot: {dag: {nope: 1}}\n")
    [problem] = check_pipeline(broken)
    assert problem.severity == "error" and "not a valid PipelineSpec" in problem.message


def test_validate_cli_checks_a_pipeline_beside_templates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vertexdist.cli import main

    text = (TEMPLATES / "cpu-small.yaml").read_text().replace("replica_count: 2", "replica_count: two")
    template = _write(tmp_path, "bad.yaml", text)
    pipeline = _write(tmp_path, "bad_pipe.py", PIPELINE.format(template=str(template)))
    with pytest.raises(SystemExit) as exit_info:
        main.run(["validate", str(pipeline), str(TEMPLATES / "cpu-small.yaml")])
    out = capsys.readouterr().out
    assert exit_info.value.code == 1, out
    assert f"{template}:" in out and "replica_count" in out and "bad_pipe.py:7" in out
    assert out.strip().splitlines()[-1].startswith("2 templates and pipelines checked: 1 error")
