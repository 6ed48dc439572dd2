"""The text of `vertexdist models list|versions`: a header over aligned columns (issue 42, item 13)."""

from __future__ import annotations

from vertexdist.cli.models_view import model_table, version_table


def test_versions_have_a_header_over_aligned_columns() -> None:
    lines = version_table(
        [
            {"versionId": "1", "versionCreateTime": "2026-01-01T00:00:00Z", "artifactUri": "gs://b/v1"},
            {
                "versionId": "12",
                "versionAliases": ["default", "candidate"],
                "versionCreateTime": "2026-01-02T00:00:00Z",
                "artifactUri": "gs://b/v12",
            },
        ]
    )
    assert lines[0].split() == ["VERSION", "ALIASES", "CREATED", "ARTIFACTS"]
    assert [line.split() for line in lines[1:]] == [
        ["1", "-", "2026-01-01T00:00:00Z", "gs://b/v1"],
        ["12", "default,candidate", "2026-01-02T00:00:00Z", "gs://b/v12"],
    ]
    assert len({line.index(line.split()[2]) for line in lines}) == 1  # CREATED starts in one column


def test_models_have_a_header_over_aligned_columns() -> None:
    lines = model_table(
        [
            {
                "name": "projects/p/locations/l/models/123",
                "displayName": "chapter",
                "versionId": "2",
                "versionAliases": ["default"],
                "createTime": "2026-01-01T00:00:00Z",
            }
        ]
    )
    assert lines[0].split() == ["ID", "DISPLAY", "NAME", "VERSION", "ALIASES", "CREATED"]
    assert lines[1].split() == ["123", "chapter", "v2", "default", "2026-01-01T00:00:00Z"]
    assert model_table([]) == []
