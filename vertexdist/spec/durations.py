"""Durations in templates: whole seconds as an int, or a string like `3600s`, `90m`, `24h`, `7d`, `1h30m`.

Vertex takes durations as proto `Duration` strings (`"<seconds>s"`); templates store plain seconds.
"""

from __future__ import annotations

import re

_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
ACCEPTED_FORMS = "whole seconds (3600) or a duration string like 3600s, 90m, 24h, 7d or 1h30m"
_MAX_PROTO_SECONDS = 315_576_000_000
DURATION_PATTERN = r"^(?:\d+|(?:\d+d)?(?:\d+h)?(?:\d+m)?(?:\d+s)?)$"


def parse_duration(value: object) -> int:
    """Seconds from an int or a duration string; raises ValueError naming the accepted forms."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got {value!r}; use {ACCEPTED_FORMS}")
    if isinstance(value, int):
        seconds = value
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        match = _DURATION.match(text)
        if text.isascii() and text.isdigit():
            seconds = int(text)
        elif not text or match is None:
            raise ValueError(f"{value!r} is not a duration; use {ACCEPTED_FORMS}")
        else:
            seconds = sum(
                int(n) * s for n, s in zip(match.groups(), _UNIT_SECONDS.values(), strict=True) if n
            )
    else:
        raise ValueError(f"expected a duration, got {type(value).__name__}; use {ACCEPTED_FORMS}")
    if seconds <= 0:
        raise ValueError(f"a duration must be positive, got {value!r}")
    if seconds > _MAX_PROTO_SECONDS:
        raise ValueError(f"{value!r} is longer than a protobuf Duration can hold (about 10,000 years)")
    return seconds


def format_duration(seconds: int) -> str:
    """The proto-JSON form Vertex takes: `"<seconds>s"`."""
    return f"{seconds}s"
