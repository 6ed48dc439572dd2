"""The part of Cloud Logging's query language the emulator's `entries:list` reads: what `vertexdist logs`
sends through google-cloud-logging (https://cloud.google.com/logging/docs/view/logging-query-language).

Terms joined by `AND`, each one of
    resource.type = "ml_job"
    resource.labels.job_id | resource.labels.task_name | resource.labels.project_id = "VALUE"
    labels."ml.googleapis.com/trial_id" = "VALUE"      (labels.trial_id, the older name, too)
    severity  = | >= | > | <= | <  NAME                (DEFAULT ... EMERGENCY, quoted or not)
    timestamp = | >= | > | <= | <  "RFC 3339"
A job id term is required (the emulator reads logs per job). Anything else (OR, NOT, parentheses, another
field or operator) is refused with the term named: ignoring a term would return entries the caller excluded.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from vertexdist.backends.base import SEVERITIES, severity_rank
from vertexdist.wire.timestamps import parse_ns

_TERM = re.compile(
    r'^(?P<field>[A-Za-z_][A-Za-z0-9_.]*?(?:\."[^"\\]*")?)\s*(?P<op>>=|<=|!=|=~|!~|=|>|<|:)\s*'
    r'(?P<value>"(?:[^"\\]|\\.)*"|[A-Za-z0-9_.:+-]+)$'
)
_OPS: dict[str, Callable[[int, int], bool]] = {
    "=": operator.eq,
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
}
_RESOURCE_LABELS = ("job_id", "task_name", "project_id")
_TRIAL_FIELDS = ('labels."ml.googleapis.com/trial_id"', "labels.trial_id")
SUPPORTED = (
    'resource.type="ml_job", resource.labels.job_id|task_name|project_id="...", '
    'labels."ml.googleapis.com/trial_id"="...", severity>=NAME, timestamp>="RFC 3339", joined by AND'
)


class FilterError(ValueError):
    """A filter the emulator cannot read; the message names the term."""


@dataclass
class EntryFilter:
    job_id: str
    resource_labels: dict[str, str] = field(default_factory=dict)
    trial: str | None = None
    severity: list[tuple[Callable[[int, int], bool], int]] = field(default_factory=list)
    timestamp: list[tuple[str, int]] = field(default_factory=list)

    def time_floor(self) -> int | None:
        """The oldest timestamp the filter can keep (to start reading there)."""
        floors = [ns if op in (">=", "=") else ns + 1 for op, ns in self.timestamp if op in (">=", ">", "=")]
        return max(floors) if floors else None

    def keeps_time(self, time_ns: int) -> bool:
        return all(_OPS[op](time_ns, ns) for op, ns in self.timestamp)

    def keeps_severity(self, severity: str) -> bool:
        rank = severity_rank(severity)
        return all(compare(rank, wanted) for compare, wanted in self.severity)


def _terms(text: str) -> list[str]:
    """The filter split at top-level ` AND ` (not inside quotes)."""
    terms, current, quoted, escaped = [], [], False, False
    index = 0
    while index < len(text):
        char = text[index]
        if quoted:
            current.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
            current.append(char)
        elif (
            text.startswith("AND", index)
            and text[index - 1 : index].isspace()
            and (index + 3 == len(text) or text[index + 3].isspace())
        ):
            terms.append("".join(current).strip())
            current = []
            index += 3
            continue
        else:
            current.append(char)
        index += 1
    if quoted:
        raise FilterError(f"the filter has an unclosed quote: {text[:120]!r}")
    terms.append("".join(current).strip())
    return terms


def _value(raw: str) -> str:
    if not raw.startswith('"'):
        return raw
    try:
        return str(json.loads(raw))
    except ValueError:
        raise FilterError(f"{raw[:60]} is not a valid string literal") from None


def parse_filter(text: str) -> EntryFilter:
    job_id: str | None = None
    found = EntryFilter(job_id="")
    for term in _terms(text):
        match = _TERM.match(term)
        if not term or not match:
            raise FilterError(f"the emulator cannot read the filter term {term[:80]!r}; it reads {SUPPORTED}")
        name, op, value = match["field"], match["op"], _value(match["value"])
        label = name.removeprefix("resource.labels.") if name.startswith("resource.labels.") else None
        if name in ("severity", "timestamp") and op in _OPS:
            if name == "severity":
                if value.upper() not in SEVERITIES:
                    raise FilterError(f"{value!r} is not a severity; use one of {', '.join(SEVERITIES)}")
                found.severity.append((_OPS[op], severity_rank(value)))
            else:
                try:
                    found.timestamp.append((op, parse_ns(value)))
                except ValueError as exc:
                    raise FilterError(f"timestamp: {exc}") from None
        elif name not in ("resource.type", *_TRIAL_FIELDS) and label not in _RESOURCE_LABELS:
            raise FilterError(f"the emulator cannot read the filter term {term[:80]!r}; it reads {SUPPORTED}")
        elif op != "=":
            raise FilterError(f"the emulator cannot read {term[:80]!r}: {name} takes only = here")
        elif name == "resource.type":
            if value != "ml_job":
                raise FilterError(f"the emulator has entries of resource type ml_job only, not {value!r}")
        elif name in _TRIAL_FIELDS:
            found.trial = value
        else:
            assert label is not None
            found.resource_labels[label] = value
            if label == "job_id":
                job_id = value
    if not job_id:
        raise FilterError('the emulator reads logs one job at a time: add resource.labels.job_id="ID"')
    found.job_id = job_id
    return found
