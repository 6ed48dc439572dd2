"""Durations: seconds or 3600s / 90m / 24h / 7d strings."""

from __future__ import annotations

import pytest

from vertexdist.spec.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (3600, 3600),
        ("3600s", 3600),
        ("90m", 5400),
        ("24h", 86400),
        ("7d", 604800),
        ("1h30m", 5400),
        ("45", 45),
    ],
)
def test_accepted_forms(text: object, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "1w", "90 minutes", "h", "-5s", 0, -1, True, 1.5, "1.5h"])
def test_rejected_forms_name_the_accepted_ones(bad: object) -> None:
    with pytest.raises(ValueError, match=r"duration|positive"):
        parse_duration(bad)


def test_format_is_proto_duration() -> None:
    assert format_duration(5400) == "5400s"
