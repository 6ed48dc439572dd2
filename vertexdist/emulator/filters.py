"""The part of Vertex's list `filter` syntax the emulator understands.

Vertex (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.customJobs/list) takes
`display_name`, `state`, `labels.KEY` and time comparisons joined with AND/OR. Supported here: equality and
inequality terms on display_name, state and labels.KEY, joined with AND, and the fields a caller adds
(`extra`: e.g. a model's `model` id). Anything else is refused (400), never silently ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

_TERM = re.compile(r'^\s*([A-Za-z_][\w.\-]*)\s*(=|!=)\s*("(?:[^"\\]|\\.)*"|[\w.\-:]+)\s*$')
Predicate = Callable[[dict[str, Any]], bool]
Extra = Mapping[str, Callable[[dict[str, Any]], Any]]


def _field_value(resource: dict[str, Any], field: str, extra: Extra | None = None) -> Any:
    if extra and field in extra:
        return extra[field](resource)
    if field.startswith("labels."):
        return (resource.get("labels") or {}).get(field.removeprefix("labels."))
    if field in ("display_name", "displayName"):
        return resource.get("displayName")
    if field == "state":
        return resource.get("state")
    known = ", ".join(["display_name", "state", *(extra or {}), "labels.KEY"])
    raise ValueError(f"filter field {field!r} is not supported (use {known})")


def parse_filter(text: str, extra: Extra | None = None) -> Predicate:
    """A predicate over resources; raises ValueError with the offending term."""
    if not text.strip():
        return lambda _resource: True
    terms = []
    for raw in re.split(r"\s+AND\s+", text.strip()):
        match = _TERM.match(raw)
        if not match:
            raise ValueError(f'filter term {raw!r} is not supported (use FIELD="VALUE" joined with AND)')
        field, op, value = match.groups()
        if value.startswith('"'):
            value = value[1:-1].replace('\\"', '"')
        _field_value({}, field, extra)  # validates the field name now, not on the first resource
        terms.append((field, op, value))

    def matches(resource: dict[str, Any]) -> bool:
        for field, op, value in terms:
            actual = _field_value(resource, field, extra)
            if (actual == value) != (op == "="):
                return False
        return True

    return matches
