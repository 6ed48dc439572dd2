"""`vertexdist render TEMPLATE`: print the CustomJobSpec (YAML for `gcloud ai custom-jobs create --config`).

`--format json` prints JSON; `--request` prints the exact CreateTrainingPipeline body submit sends.
Secret-looking env values are masked. The job's own output folder shows as `<job-folder>` (submit fills it
in), or with `--resume-from JOB` as that job's folder. Never imports torch, nor google-cloud-aiplatform
unless `--resume-from` names a job to look up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from vertexdist.cli.resume import ResumeFrom
from vertexdist.cli.targets import Location, Project

FORMATS = ("yaml", "json")


def dump(obj: Any, output_format: str) -> str:
    """YAML (block style, keys in render order) or indented JSON."""
    if output_format == "json":
        return json.dumps(obj, indent=2)
    import yaml

    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, width=110)


def render(
    template: Path = typer.Argument(..., help="The job template (.yaml)."),
    output_format: str = typer.Option("yaml", "--format", help="yaml (default) or json."),
    request: bool = typer.Option(
        False, "--request", help="Print the CreateTrainingPipeline request body instead of the CustomJobSpec."
    ),
    resume_from: ResumeFrom = None,
    project: Project = None,
    location: Location = None,
) -> None:
    """Print what Vertex receives for TEMPLATE: the CustomJobSpec, or with --request the whole API request.

    The package URI carries the digest of the trainer sdist submit will upload; an image URI to be built
    shows <pending>. Each job gets its own output folder: <job-folder> stands for it until submit picks
    a fresh one (UTC time and a random suffix); --resume-from JOB shows the earlier job's folder instead.
    Secret-looking env values (SECRET, TOKEN, PASSWORD, KEY, CREDENTIAL) are masked.
    """
    from vertexdist.errors import UsageError
    from vertexdist.render import mask_secrets, render_job_spec, render_request
    from vertexdist.spec.loader import load_template

    if output_format not in FORMATS:
        raise UsageError(f"unknown --format {output_format!r}", hint=f"use one of {', '.join(FORMATS)}")
    loaded = load_template(template)
    if request or resume_from is not None or project or location:
        # Where the request goes, as submit finds it: flags, then the template, then the environment.
        from vertexdist.jobs.submit import Where, resolve_target

        loaded, _target = resolve_target(
            loaded,
            Where(project=project, location=location),
            no_project_hint=(
                "pass --project PROJECT, set GOOGLE_CLOUD_PROJECT, or put `project:` in the template"
            ),
        )
    if request:  # the code's git commit as a label, as submit sends it (jobs/run_record.py)
        from vertexdist.jobs.run_record import with_code_labels

        loaded = with_code_labels(loaded)
    package_uri = None
    if loaded.build is None and loaded.staging_bucket:
        from vertexdist.packaging import planned_package_uri

        package_uri = planned_package_uri(loaded.trainer, loaded.staging_bucket)
    resumed = None
    if resume_from is not None:
        from vertexdist.jobs.find import resume_output_dir

        resumed = resume_output_dir(
            resume_from, project=loaded.project, location=loaded.location, endpoint=None, transport=None
        )
    body = (
        render_request(loaded, package_uri=package_uri, resume_from=resumed)
        if request
        else render_job_spec(loaded, package_uri=package_uri, resume_from=resumed)
    )
    typer.echo(dump(mask_secrets(body), output_format), nl=output_format == "json")
    if not request and loaded.model is not None:
        _echo_model(loaded, output_format)


def _echo_model(loaded: Any, output_format: str) -> None:
    """The Model the pipeline uploads (`model:`), after the CustomJobSpec: as YAML comments, which keep it
    a valid `--config` file, or for JSON on stderr."""
    from vertexdist.render.pipeline import render_model_upload

    text = dump(render_model_upload(loaded), output_format)
    if output_format == "json":
        typer.echo("# once the job succeeds, the TrainingPipeline uploads:\n" + text, err=True)
        return
    lines = ["once the job succeeds, the TrainingPipeline uploads (render --request shows it in place):"]
    typer.echo("".join(f"# {line}\n" for line in [*lines, *text.splitlines()]), nl=False)


def register(app: typer.Typer) -> None:
    app.command("render")(render)
