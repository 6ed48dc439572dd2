"""`vertexdist validate PIPELINE.py|PIPELINE.yaml`: the pipeline compiles, and its training steps' templates
are sound.

A .py file is compiled as `pipeline run` compiles it (`jobs.pipeline_runs.compiled`: kfp's compiler over its
one `@dsl.pipeline` function), with every `training_step` call recorded: each call's template is checked as
`validate` checks a template (`spec.loader.inspect_file`), and each problem names the template's
file/line/field and the step (the line of the pipeline file that calls `training_step`). A template with
errors makes the compile fail too (the step loads it); then the template's problems are what is reported.
A compiled PipelineSpec (.yaml/.json) is checked against kfp's PipelineSpec message; it names no templates
(a step's CustomJob is data in it), so only the .py file can have its templates checked.
"""

from __future__ import annotations

import json
import re
import tempfile
import traceback
from pathlib import Path
from typing import Any

from vertexdist.errors import Problem, VertexdistError

SPEC_SUFFIXES = (".yaml", ".yml", ".json")
_HEAD = 64 * 1024
_SPEC_KEY = re.compile(
    rb'^# PIPELINE DEFINITION|^"?(components|pipelineInfo|pipelineSpec|deploymentSpec)"?\s*:'
    rb'|"(pipelineInfo|pipelineSpec)"\s*:',
    re.M,
)


def is_pipeline_file(path: Path) -> bool:
    """A pipeline function's .py file, or a compiled PipelineSpec (top-level `pipelineInfo` and `root`, or
    a PipelineJob's `pipelineSpec`)."""
    if not path.is_file():
        return False
    if path.suffix == ".py":
        return True
    return path.suffix in SPEC_SUFFIXES and _names_a_spec(path) and _spec_of(path) is not None


def _names_a_spec(path: Path) -> bool:
    """Whether the file's start names a PipelineSpec's keys (so a template, however large, is not parsed
    twice): kfp's compiler writes a `# PIPELINE DEFINITION` header, then `components:` ... `pipelineInfo:`"""
    try:
        with open(path, "rb") as handle:
            head = handle.read(_HEAD)
    except OSError:
        return False
    return _SPEC_KEY.search(head) is not None


def _spec_of(path: Path) -> dict[str, Any] | None:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if isinstance(data, dict) and isinstance(data.get("pipelineSpec"), dict):
        data = data["pipelineSpec"]
    if isinstance(data, dict) and "pipelineInfo" in data and "root" in data:
        return data
    return None


def check_pipeline(path: Path) -> list[Problem]:
    """Every problem of one pipeline file and of its training steps' templates."""
    if path.suffix == ".py":
        return _check_function_file(path)
    return _check_spec(path)


def _check_function_file(path: Path) -> list[Problem]:
    from vertexdist.jobs.pipeline_runs import compiled
    from vertexdist.pipelines.step import recording_steps
    from vertexdist.spec.loader import inspect_file

    failure: VertexdistError | None = None
    with tempfile.TemporaryDirectory(prefix="vertexdist-validate-") as scratch, recording_steps() as calls:
        try:
            compiled(path, Path(scratch))
        except VertexdistError as exc:
            failure = exc
        except Exception as exc:  # kfp's compiler refusing the pipeline
            failure = VertexdistError(f"kfp's compiler: {type(exc).__name__}: {exc}")
            failure.__cause__ = exc
    problems: list[Problem] = []
    checked: dict[Path, list[Problem]] = {}
    for call in calls:
        key = call.template.resolve()
        if key not in checked:
            checked[key] = inspect_file(call.template)[1]
        step = f"{_shown(call.file)}:{call.line}: training_step({str(call.template)!r})"
        problems += [
            Problem(p.file, p.line, p.col, p.path, f"{p.message} (in {step})", p.hint, p.severity)
            for p in checked[key]
        ]
    template_errors = any(p.severity == "error" for p in problems)
    if failure is not None and not template_errors:
        problems.insert(0, _compile_problem(path, failure))
    return problems


def _shown(file: str) -> str:
    """A path as the user gave it where it is under the working folder."""
    try:
        return str(Path(file).resolve().relative_to(Path.cwd()))
    except ValueError:
        return file


def _compile_problem(path: Path, failure: VertexdistError) -> Problem:
    """The failure at the pipeline file's deepest line its traceback passes through (else its first)."""
    line = 1
    cause = failure.__cause__
    if cause is not None:
        for frame in traceback.extract_tb(cause.__traceback__):
            if Path(frame.filename).resolve() == path.resolve() and frame.lineno:
                line = frame.lineno
    if isinstance(cause, SyntaxError) and cause.filename and cause.lineno:
        line = cause.lineno if Path(cause.filename).resolve() == path.resolve() else line
    message = failure.message.removeprefix(f"{path}: ")
    hint = failure.hint or "the file must import and compile as `vertexdist pipeline run` compiles it"
    return Problem(str(path), line, 1, "", f"it does not compile: {message}", hint)


def _check_spec(path: Path) -> list[Problem]:
    spec = _spec_of(path)
    if spec is None:
        return [
            Problem(
                str(path),
                1,
                1,
                "",
                "not a PipelineSpec (no top-level pipelineInfo and root)",
                "give a compiled pipeline (kfp's compiler writes one) or the pipeline's .py file",
            )
        ]
    try:
        from google.protobuf import json_format
        from kfp.pipeline_spec import pipeline_spec_pb2
    except ImportError:
        return [
            Problem(
                str(path),
                1,
                1,
                "",
                "checking a PipelineSpec needs kfp",
                "pip install 'vertexdist[pipelines]'",
                "warning",
            )
        ]
    try:
        json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec())
    except json_format.ParseError as exc:
        return [Problem(str(path), 1, 1, "", f"not a valid PipelineSpec: {exc}", None)]
    if "custom_job.launcher" not in json.dumps(spec.get("deploymentSpec", {})):
        return []  # no CustomJob step: nothing more to check
    return [
        Problem(
            str(path),
            1,
            1,
            "",
            "a compiled PipelineSpec names no templates: its training steps were not checked",
            "validate the pipeline's .py file to check its templates too",
            "note",
        )
    ]
