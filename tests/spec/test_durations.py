"""The one duration parser: seconds, 3600s / 90m / 24h / 7d / 1h30m strings, and proto `"1.5s"` Durations."""

from __future__ import annotations

from typing import Any

import pytest

from vertexdist.errors import TemplateError
from vertexdist.spec.durations import format_duration, is_proto_duration, parse_duration


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
        ("1.5s", 1.5),
        ("0.000000001s", 1e-9),
        (" 2H ", 7200),
    ],
)
def test_accepted_forms(text: object, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "bad", ["", "1w", "90 minutes", "h", "-5s", "0s", 0, -1, True, 1.5, "1.5h", None, "1.5m", "1.0000000001s"]
)
def test_rejected_forms_name_the_accepted_ones(bad: object) -> None:
    with pytest.raises(ValueError, match=r"duration|positive"):
        parse_duration(bad)


def test_format_is_proto_duration() -> None:
    assert format_duration(5400) == "5400s"


def test_proto_form_is_what_the_api_takes() -> None:
    assert is_proto_duration("3600s") and is_proto_duration("1.5s")
    assert not any(is_proto_duration(v) for v in ("90m", "3600", 3600, "1h30m", "s"))


def test_templates_keep_whole_seconds(build_template: Any) -> None:
    assert build_template(timeout="1h30m").timeout == 5400
    with pytest.raises(TemplateError, match="whole seconds"):
        build_template(timeout="1.5s")
