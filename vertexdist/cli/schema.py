"""`vertexdist schema`: the JSON Schema of job templates, for editors (yaml-language-server) and CI."""

from __future__ import annotations

import json
from typing import Any

import typer

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def template_schema() -> dict[str, Any]:
    """The JSON Schema of `JobTemplate`, as validation sees it (inputs, not dumps)."""
    from vertexdist.spec.models import JobTemplate

    schema = JobTemplate.model_json_schema(mode="validation")
    return {"$schema": SCHEMA_DIALECT, **schema}


def schema() -> None:
    """Print the templates' JSON Schema. Save it and point editors at it with a first line like
    `# yaml-language-server: $schema=job-template.schema.json`."""
    typer.echo(json.dumps(template_schema(), indent=2))


def register(app: typer.Typer) -> None:
    app.command("schema")(schema)
