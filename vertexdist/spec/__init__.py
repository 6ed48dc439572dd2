"""Job templates: models, YAML loader, machine catalog and rules. No Google Cloud code, no torch."""

from __future__ import annotations

from vertexdist.spec._pydantic_plugins import without_plugins

with without_plugins():  # every spec module is first imported through here: its models are built now
    from vertexdist.spec.findings import Finding
    from vertexdist.spec.loader import check_paths, inspect_file, load_template, template_files
    from vertexdist.spec.models import BuildSpec, JobTemplate, TrainerSpec
    from vertexdist.spec.rules import check_template

__all__ = [
    "BuildSpec",
    "Finding",
    "JobTemplate",
    "TrainerSpec",
    "check_paths",
    "check_template",
    "inspect_file",
    "load_template",
    "template_files",
]
