"""The one duration parser: templates, `local-run --timeout`, and the proto `Duration`s of the wire format.

Accepted: whole seconds (`3600`, `"3600"`), a duration string like `3600s`, `90m`, `24h`, `7d` or `1h30m`,
and the proto-JSON form Vertex sends and takes (`"3600s"`, `"1.5s"`: https://protobuf.dev/programming-guides/json/).
Templates keep whole seconds; the wire may carry fractions of a second.
"""

from __future__ import annotations

import re

_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_COMPOUND = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_PROTO = re.compile(r"^(\d+)(\.\d{1,9})?s$")
ACCEPTED_FORMS = "whole seconds (3600) or a duration string like 3600s, 90m, 24h, 7d or 1h30m"
_MAX_PROTO_SECONDS = 315_576_000_000
DURATION_PATTERN = r"^(?:\d+|(?:\d+d)?(?:\d+h)?(?:\d+m)?(?:\d+s)?|\d+\.\d{1,9}s)$"


def _seconds(text: str) -> float | None:
    if text.isascii() and text.isdigit():
        return float(int(text))
    proto = _PROTO.match(text)
    if proto:
        return float(proto.group(1) + (proto.group(2) or ""))
    compound = _COMPOUND.match(text)
    if not text or compound is None:
        return None
    return float(sum(int(n) * s for n, s in zip(compound.groups(), _UNIT_SECONDS.values(), strict=True) if n))


def parse_duration(value: object) -> float:
    """Seconds from an int or a duration string; raises ValueError naming the accepted forms."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        kind = repr(value) if isinstance(value, bool | float) else type(value).__name__
        raise ValueError(f"expected a duration, got {kind}; use {ACCEPTED_FORMS}")
    seconds = float(value) if isinstance(value, int) else _seconds(value.strip().lower().replace(" ", ""))
    if seconds is None:
        raise ValueError(f"{value!r} is not a duration; use {ACCEPTED_FORMS}")
    if seconds <= 0:
        raise ValueError(f"a duration must be positive, got {value!r}")
    if seconds > _MAX_PROTO_SECONDS:
        raise ValueError(f"{value!r} is longer than a protobuf Duration can hold (about 10,000 years)")
    return seconds


def is_proto_duration(value: object) -> bool:
    """Whether `value` is a Duration as the REST API takes it (`"3600s"`); the emulator refuses the rest."""
    return isinstance(value, str) and _PROTO.match(value) is not None


def format_duration(seconds: int) -> str:
    """The proto-JSON form Vertex takes: `"<seconds>s"`."""
    return f"{seconds}s"
