"""The exact request body of every shipped template, checked in (`<template>.request.json` beside this file;
`examples-<name>.request.json` for examples/<name>/job.yaml).

A diff fails the test: a change to what Vertex receives must be made on purpose. To accept one, regenerate
with `VERTEXDIST_UPDATE_GOLDEN=1 pytest tests/golden` and commit the new files with the change that caused it.
The package and image URIs are fixed stand-ins (their real digests change with every trainer edit and are
tested in tests/spec and tests/packaging).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from vertexdist.render import render_request
from vertexdist.spec import load_template

HERE = Path(__file__).resolve().parent
TEMPLATES = sorted((HERE.parents[1] / "job_templates").glob("*.yaml")) + sorted(
    (HERE.parents[1] / "examples").glob("*/job.yaml")
)
PACKAGE_URI = "gs://golden-bucket/vertexdist/packages/0123456789abcdef/trainer_pkg-0.1.tar.gz"
IMAGE_URI = "us-central1-docker.pkg.dev/golden-project/trainers/vertexdist-trainer:ctx-0123456789abcdef0123"


def _golden_name(template: Path) -> str:
    return f"examples-{template.parent.name}" if template.parent.parent.name == "examples" else template.stem


def _request(template: Path) -> str:
    loaded = load_template(template)
    if loaded.build is not None:
        body = render_request(loaded, image_uri=IMAGE_URI)
    else:
        body = render_request(loaded, package_uri=PACKAGE_URI)
    return json.dumps(body, indent=2, sort_keys=False) + "\n"


def test_every_shipped_template_has_a_golden_request() -> None:
    goldens = {p.name.removesuffix(".request.json") for p in HERE.glob("*.request.json")}
    assert goldens == {_golden_name(t) for t in TEMPLATES}, (
        "add or remove goldens: VERTEXDIST_UPDATE_GOLDEN=1"
    )


@pytest.mark.parametrize("template", TEMPLATES, ids=_golden_name)
def test_request_matches_its_golden_file(template: Path) -> None:
    golden = HERE / f"{_golden_name(template)}.request.json"
    actual = _request(template)
    if os.environ.get("VERTEXDIST_UPDATE_GOLDEN") == "1":
        golden.write_text(actual)
    assert golden.is_file(), f"no golden file for {template.name}: run with VERTEXDIST_UPDATE_GOLDEN=1"
    assert actual == golden.read_text(), f"{template.name}'s request changed; see the module docstring"
