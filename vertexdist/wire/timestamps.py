"""Timestamps as the Google APIs write them (RFC 3339, `Z` or an offset, up to nanoseconds), to and from
integer nanoseconds since the epoch: exact to compare, where floats and datetimes (microseconds) are not."""

from __future__ import annotations

import functools
import re
from datetime import datetime, timezone

_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|z|[+-]\d{2}:?\d{2})$")


@functools.lru_cache(maxsize=64)
def _whole_seconds(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def format_ns(time_ns: int) -> str:
    """`2024-05-01T12:00:00.123456789Z` (UTC, nine fraction digits: Cloud Logging's form)."""
    seconds, nanos = divmod(time_ns, 1_000_000_000)
    return f"{_whole_seconds(seconds)}.{nanos:09d}Z"


def parse_ns(text: str) -> int:
    """Nanoseconds since the epoch; ValueError naming the accepted form."""
    match = _RFC3339.match(text.strip())
    if not match:
        raise ValueError(f"{text[:60]!r} is not an RFC 3339 timestamp like 2024-05-01T12:00:00.5Z")
    date, clock, fraction, zone = match.groups()
    zone = "+00:00" if zone in ("Z", "z") else zone
    if len(zone) == 5:  # +0000, as strftime's %z writes it (the logging client's default filter does)
        zone = f"{zone[:3]}:{zone[3:]}"
    try:
        whole = datetime.fromisoformat(f"{date}T{clock}{zone}")
    except ValueError as exc:
        raise ValueError(f"{text[:60]!r} is not a valid time: {exc}") from None
    nanos = int((fraction or "0").ljust(9, "0"))
    return int(whole.timestamp()) * 1_000_000_000 + nanos


def datetime_ns(moment: datetime) -> int:
    """A datetime (naive ones taken as UTC) in nanoseconds, exactly."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    whole = moment.replace(microsecond=0)
    return int(whole.timestamp()) * 1_000_000_000 + moment.microsecond * 1000
