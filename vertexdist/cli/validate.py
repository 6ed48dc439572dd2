"""`vertexdist validate PATH...`: check template files and folders; one line per problem plus a hint.

Exit 0 when there are no errors (warnings allowed), 1 with errors, 2 on usage errors (missing paths).
Imports only the spec package (pydantic + yaml), never google-cloud-aiplatform or torch; only
`--check-resources` reaches a backend (Vertex or the emulator) to read each template's persistent resource.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from vertexdist.cli.targets import (
    EMULATOR_DATA_DIR,
    EmulatorDataDir,
    Endpoint,
    Location,
    Project,
    Transport,
    UseEmulator,
)

if TYPE_CHECKING:
    from vertexdist.errors import Problem
    from vertexdist.jobs.where import JobPlace
    from vertexdist.spec.models import JobTemplate

FORMATS = ("text", "json", "github")
# A screenful: one broken file (say a list of 10,000 wrong values) must not bury the others.
SHOWN_PER_FILE = 20


def format_text(problem: Problem) -> str:
    """`FILE:LINE:COL: field.path: message` (warnings say so), then an indented hint."""
    where = f"{problem.path}: " if problem.path else ""
    marker = "" if problem.severity == "error" else f"{problem.severity}: "
    line = f"{problem.location()}: {where}{marker}{problem.message}"
    return line + (f"\n    hint: {problem.hint}" if problem.hint else "")


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


_GITHUB_LEVELS = {"error": "error", "warning": "warning", "note": "notice"}


def format_github(problem: Problem) -> str:
    """A GitHub Actions workflow annotation: `::error file=F,line=L,col=C,title=field.path::message`."""
    title = _escape_property(problem.path or "template")
    message = problem.message + (f"\nhint: {problem.hint}" if problem.hint else "")
    return (
        f"::{_GITHUB_LEVELS[problem.severity]} file={_escape_property(problem.file)},line={problem.line},"
        f"col={problem.col},title={title}::{_escape_data(message)}"
    )


def _count(problems: list[Problem], severity: str) -> int:
    return sum(p.severity == severity for p in problems)


def _summary(files: int, problems: list[Problem], pipelines: int = 0) -> str:
    errors, warnings, notes = (_count(problems, s) for s in ("error", "warning", "note"))
    noun = "template" if files == 1 else "templates"
    if pipelines:
        noun = f"pipeline{'s' * (pipelines != 1)}" if files == pipelines else f"{noun} and pipelines"
    counts = f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"
    counts += f", {notes} note{'s' * (notes != 1)}" if notes else ""
    return f"{files} {noun} checked: {counts}"


# A walk through a big tree may pass over many files; the line names a few.
SKIPPED_NAMED = 5


def _skipped_line(skipped: list[Path]) -> str:
    shown = ", ".join(str(p) for p in skipped[:SKIPPED_NAMED])
    more = f" and {len(skipped) - SKIPPED_NAMED} more" if len(skipped) > SKIPPED_NAMED else ""
    files = (
        "1 YAML file that is not a job template"
        if len(skipped) == 1
        else (f"{len(skipped)} YAML files that are not job templates")
    )
    return (
        f"skipped {files} (few template fields at the top level): {shown}{more};"
        " name a file to check it anyway"
    )


def validate(
    paths: list[str] = typer.Argument(
        ...,
        help="Template files, or folders: their *.yaml / *.yml files that look like templates (mostly"
        " template fields at the top level, or in a job_templates folder); hidden folders are not searched."
        " A pipeline file (.py, or a compiled PipelineSpec) is compiled and its training steps' templates"
        " checked.",
    ),
    output_format: str = typer.Option(
        "text", "--format", help="text, json or github (workflow annotations)."
    ),
    check_resources: bool = typer.Option(
        False,
        "--check-resources",
        help="Also read each template's persistent_resource_id from Vertex (or --emulator) and check the"
        " job fits it: region, machine shapes, replicas.",
    ),
    project: Project = None,
    location: Location = None,
    endpoint: Endpoint = None,
    transport: Transport = None,
    emulator: UseEmulator = False,
    emulator_data_dir: EmulatorDataDir = EMULATOR_DATA_DIR,
) -> None:
    """Check job templates (fields, machine/accelerator fit, reduction servers, URIs, labels), pipelines."""
    from vertexdist.errors import UsageError
    from vertexdist.spec.loader import find_templates, inspect_file

    if output_format not in FORMATS:
        raise UsageError(f"unknown --format {output_format!r}", hint=f"use one of {', '.join(FORMATS)}")
    from vertexdist.pipelines.check import check_pipeline, is_pipeline_file

    pipelines = [Path(p) for p in paths if is_pipeline_file(Path(p))]
    found = (
        find_templates([p for p in paths if Path(p) not in pipelines])
        if len(pipelines) < len(paths)
        else None
    )
    files = found.files if found is not None else []
    skipped = found.skipped if found is not None else []
    if not files and not pipelines:
        raise UsageError(
            f"no templates (*.yaml, *.yml) under {', '.join(paths)}"
            + (f"; {_skipped_line(skipped)}" if skipped else ""),
            hint="pass template files or their folders",
        )
    inspected = [(file, *inspect_file(file)) for file in files]
    by_file = [(file, in_file) for file, _template, in_file in inspected]
    if check_resources:
        from vertexdist.jobs.where import JobPlace

        place = JobPlace(project, location, endpoint, transport, emulator_data_dir if emulator else None)
        by_file = [
            (file, in_file + _resource_problems(file, template, place))
            for file, template, in_file in inspected
        ]
    by_file += [(pipeline, check_pipeline(pipeline)) for pipeline in pipelines]
    files = [*files, *pipelines]
    problems = [problem for _file, in_file in by_file for problem in in_file]
    if output_format == "json":
        report = {
            "files": [str(f) for f in files],
            "errors": _count(problems, "error"),
            "warnings": _count(problems, "warning"),
            "notes": _count(problems, "note"),
            "problems": [asdict(p) for p in problems],
            "skipped": [str(f) for f in skipped],
        }
        print(json.dumps(report, indent=2))
    else:
        render_one = format_github if output_format == "github" else format_text
        for file, in_file in by_file:
            for problem in in_file[:SHOWN_PER_FILE]:
                print(render_one(problem))
            if len(in_file) > SHOWN_PER_FILE:
                print(f"{file}: ... and {len(in_file) - SHOWN_PER_FILE} more problems")
        if skipped:
            print(_skipped_line(skipped), file=sys.stderr)
        print(_summary(len(files), problems, len(pipelines)))  # stdout: `2>/dev/null` keeps it
    if any(p.severity == "error" for p in problems):
        raise typer.Exit(1)


def _resource_problems(file: Path, template: JobTemplate | None, place: JobPlace) -> list[Problem]:
    """`--check-resources`: a template without errors, checked against its persistent resource."""
    from vertexdist.jobs.resource_check import check_resource

    if template is None or template.persistent_resource_id is None:
        return []
    return check_resource(file, template, place)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
