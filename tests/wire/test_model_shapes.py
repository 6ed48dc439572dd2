"""Issue 41, part 3: the Model Registry trusted its input. `modelId` `x/customJobs/<id>` overwrote that
custom job's file, `x/../evil` wrote outside the models folder, a non-string display name or labels made
every list a 500, `versionAliases: 5`, `labels: "abc"`, a `parentModel` naming a custom job were 500s, and a
5 MB display name was accepted. The shapes, checked before any name is formed (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from vertexdist.wire.model_shapes import model_problems, upload_problems

LOCATION = "projects/p/locations/us-central1"
GOOD = {"model": {"displayName": "m", "labels": {"team": "ml"}, "versionAliases": ["prod"]}}


def test_a_good_upload_has_no_problem() -> None:
    assert upload_problems(GOOD, LOCATION) == []
    assert (
        upload_problems({**GOOD, "modelId": "my_model-1", "parentModel": f"{LOCATION}/models/7"}, LOCATION)
        == []
    )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"modelId": "x/customJobs/123"}, "modelId"),
        ({"modelId": "x/../evil"}, "modelId"),
        ({"modelId": "../evil"}, "modelId"),
        ({"modelId": "-x"}, "modelId"),
        ({"modelId": "a" * 64}, "modelId"),
        ({"modelId": 5}, "modelId"),
        ({"parentModel": f"{LOCATION}/customJobs/123"}, "parentModel"),
        ({"parentModel": "projects/other/locations/us-central1/models/1"}, "parentModel"),
        ({"parentModel": f"{LOCATION}/models/1/../../customJobs/2"}, "parentModel"),
        ({"parentModel": ["x"]}, "parentModel"),
        ({"model": {"displayName": 5}}, "model.displayName"),
        ({"model": {"displayName": "x" * 5_000_000}}, "model.displayName"),
        ({"model": {}}, "model.displayName"),
        ({"model": {"displayName": "m", "labels": "abc"}}, "model.labels"),
        ({"model": {"displayName": "m", "labels": {"k": 5}}}, "model.labels"),
        ({"model": {"displayName": "m", "labels": {"Bad": "v"}}}, "model.labels"),
        ({"model": {"displayName": "m", "versionAliases": 5}}, "model.versionAliases"),
        ({"model": {"displayName": "m", "versionAliases": [5]}}, "model.versionAliases"),
        ({"model": {"displayName": "m", "versionAliases": ["1"]}}, "model.versionAliases"),
        ({"model": {"displayName": "m", "description": ["x"]}}, "model.description"),
        ({"model": "m"}, "model"),
    ],
)
def test_each_bad_field_is_named(change: dict[str, Any], field: str) -> None:
    found = upload_problems({**GOOD, **change}, LOCATION)
    assert field in [f for f, _ in found], found


def test_a_patch_checks_only_what_its_mask_names() -> None:
    body = {"displayName": 5, "labels": {"ok": "yes"}}
    assert [f for f, _ in model_problems(body, "model", fields=("labels",))] == []
    assert [f for f, _ in model_problems(body, "model", fields=("displayName",))] == ["model.displayName"]
