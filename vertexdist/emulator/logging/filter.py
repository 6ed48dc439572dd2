"""The part of Cloud Logging's query language the emulator's `entries:list` reads: what `vertexdist logs`
sends through google-cloud-logging (https://cloud.google.com/logging/docs/view/logging-query-language).

Terms joined by `AND` (or side by side), each one of
    resource.type = "ml_job"
    resource.labels.job_id | resource.labels.task_name | resource.labels.project_id = "VALUE"
    labels."ml.googleapis.com/trial_id" = "VALUE"      (labels.trial_id, the older name, too)
    severity  = | >= | > | <= | <  NAME                (DEFAULT ... EMERGENCY, quoted or not)
    timestamp = | >= | > | <= | <  "RFC 3339"
    insertId  = | >= | > | <= | <  "ID"
or a group of the last three in `OR`, `NOT` and parentheses, as `gcloud ai custom-jobs stream-logs` sends
when two entries share a timestamp: `((timestamp="T" AND insertId>"I") OR timestamp>"T")`
(googlecloudsdk/command_lib/logs/stream.py). Precedence is Cloud Logging's: NOT, then OR, then AND. Nesting
is refused beyond MAX_DEPTH, so no filter reaches Python's recursion limit. A job id term is required at
the top (the emulator reads logs per job). Anything else (another field or operator, a job's labels inside
OR) is refused with the term named: ignoring a term would return entries the caller excluded.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vertexdist.backends.base import SEVERITIES, severity_rank
from vertexdist.wire.timestamps import parse_ns

_FIELD = r'[A-Za-z_][A-Za-z0-9_]*(?:\.(?:[A-Za-z_][A-Za-z0-9_]*|"[^"\\]*"))*'
_VALUE = r'"(?:[^"\\]|\\.)*"|[A-Za-z0-9_.:+-]+'
_TOKEN = re.compile(
    r"\s*(?:(?P<open>\()|(?P<close>\))|(?P<word>AND|OR|NOT)(?=[\s()]|$)"
    rf"|(?P<term>(?P<field>{_FIELD})\s*(?P<op>>=|<=|!=|=~|!~|=|>|<|:)\s*(?P<value>{_VALUE})))"
)
MAX_DEPTH = 16  # parentheses and NOTs inside each other: refused beyond, long before Python's own limit
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
}
_RESOURCE_LABELS = ("job_id", "task_name", "project_id")
_TRIAL_FIELDS = ('labels."ml.googleapis.com/trial_id"', "labels.trial_id")
_ENTRY_FIELDS = ("timestamp", "severity", "insertId")
SUPPORTED = (
    'resource.type="ml_job", resource.labels.job_id|task_name|project_id="...", '
    'labels."ml.googleapis.com/trial_id"="...", severity>=NAME, timestamp>="RFC 3339", insertId>"ID", '
    "joined by AND; timestamp, severity and insertId terms also in OR, NOT and parentheses"
)
# An entry as a condition sees it: (timestamp ns, insertId, severity rank).
Condition = Callable[[int, str, int], bool]


class FilterError(ValueError):
    """A filter the emulator cannot read; the message names the term."""


@dataclass
class EntryFilter:
    job_id: str
    resource_labels: dict[str, str] = field(default_factory=dict)
    trial: str | None = None
    severity: list[tuple[Callable[[int, int], bool], int]] = field(default_factory=list)
    timestamp: list[tuple[str, int]] = field(default_factory=list)
    conditions: list[Condition] = field(default_factory=list)
    floors: list[int] = field(default_factory=list)  # of the conditions: none keeps an older entry

    def time_floor(self) -> int | None:
        """The oldest timestamp the filter can keep (to start reading there)."""
        floors = [_floor(op, ns) for op, ns in self.timestamp if op in (">=", ">", "=")] + self.floors
        return max(floors) if floors else None

    def keeps(self, key: tuple[int, str], severity: str) -> bool:
        """Whether the entry (timestamp ns, insertId) of `severity` passes every term."""
        if not (self.keeps_time(key[0]) and self.keeps_severity(severity)):
            return False
        rank = severity_rank(severity)
        return all(condition(key[0], key[1], rank) for condition in self.conditions)

    def keeps_time(self, time_ns: int) -> bool:
        return all(_OPS[op](time_ns, ns) for op, ns in self.timestamp)

    def keeps_severity(self, severity: str) -> bool:
        rank = severity_rank(severity)
        return all(compare(rank, wanted) for compare, wanted in self.severity)


def _floor(op: str, ns: int) -> int:
    return ns if op in (">=", "=") else ns + 1


# A parsed filter: ("term", match) | ("not", node) | ("and" | "or", [nodes]).
Node = tuple[str, Any]


class _Parser:
    """Cloud Logging's precedence: NOT, then OR, then AND (adjacent terms are joined by AND)."""

    def __init__(self, text: str) -> None:
        self.tokens: list[re.Match[str]] = []
        at = 0
        while text[at:].strip():
            match = _TOKEN.match(text, at)
            if not match:
                rest = text[at:].strip()
                raise FilterError(
                    f"the emulator cannot read the filter at {rest[:80]!r}; it reads {SUPPORTED}"
                )
            self.tokens.append(match)
            at = match.end()
        self.at = 0

    def _peek(self) -> str:
        if self.at >= len(self.tokens):
            return ""
        token = self.tokens[self.at]
        return token["word"] or ("(" if token["open"] else ")" if token["close"] else "term")

    def parse(self) -> Node:
        if not self.tokens:
            raise FilterError('the filter is empty: add resource.labels.job_id="ID"')
        node = self._and(0)
        if self.at < len(self.tokens):
            raise FilterError(f"the filter has an unmatched ')' at {self.tokens[self.at].start()}")
        return node

    def _and(self, depth: int) -> Node:
        nodes = [self._or(depth)]
        while self._peek() not in ("", ")", "OR"):
            if self._peek() == "AND":
                self.at += 1
            nodes.append(self._or(depth))
        return nodes[0] if len(nodes) == 1 else ("and", nodes)

    def _or(self, depth: int) -> Node:
        nodes = [self._unary(depth)]
        while self._peek() == "OR":
            self.at += 1
            nodes.append(self._unary(depth))
        return nodes[0] if len(nodes) == 1 else ("or", nodes)

    def _unary(self, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise FilterError(f"the filter nests parentheses and NOTs more than {MAX_DEPTH} deep")
        kind = self._peek()
        if kind == "":
            raise FilterError("the filter ends where a term was expected")
        token = self.tokens[self.at]
        self.at += 1
        if kind == "NOT":
            return ("not", self._unary(depth + 1))
        if kind == "(":
            node = self._and(depth + 1)
            if self._peek() != ")":
                raise FilterError("the filter has an unclosed '('")
            self.at += 1
            return node
        if kind == "term":
            return ("term", token)
        raise FilterError(f"the filter has {token.group().strip()!r} where a term was expected")


def _factors(node: Node) -> list[Node]:
    """The terms joined by AND at the top (parentheses around an AND taken off)."""
    if node[0] == "and":
        assert isinstance(node[1], list)
        return [leaf for child in node[1] for leaf in _factors(child)]
    return [node]


def _entry_term(match: re.Match[str]) -> tuple[Condition, int | None]:
    """A timestamp, severity or insertId term as a condition, and the oldest time it keeps."""
    name, op, value = match["field"], match["op"], _value(match["value"])
    if name not in _ENTRY_FIELDS or op not in _OPS:
        raise FilterError(
            f"the emulator cannot read the filter term {match.group().strip()[:80]!r} inside OR, NOT or "
            "parentheses: there it reads timestamp, severity and insertId comparisons"
        )
    compare = _OPS[op]
    if name == "timestamp":
        ns = _timestamp(value)
        floor = _floor(op, ns) if op in (">=", ">", "=") else None
        return (lambda t, _i, _s: compare(t, ns)), floor
    if name == "severity":
        rank = _severity(value)
        return (lambda _t, _i, s: compare(s, rank)), None
    return (lambda _t, i, _s: compare(i, value)), None


def _condition(node: Node) -> tuple[Condition, int | None]:
    """`node` (depth at most MAX_DEPTH) as a condition, and the oldest time it keeps (None: any)."""
    kind, body = node
    if kind == "term":
        assert isinstance(body, re.Match)
        return _entry_term(body)
    if kind == "not":
        inner, _ = _condition(body)
        return (lambda t, i, s: not inner(t, i, s)), None
    assert isinstance(body, list)
    parts = [_condition(child) for child in body]
    conditions = [condition for condition, _ in parts]
    floors = [floor for _, floor in parts]
    if kind == "and":
        known = [floor for floor in floors if floor is not None]
        return (lambda t, i, s: all(c(t, i, s) for c in conditions)), max(known) if known else None
    lowest = None if None in floors else min(floor for floor in floors if floor is not None)
    return (lambda t, i, s: any(c(t, i, s) for c in conditions)), lowest


def _timestamp(value: str) -> int:
    try:
        return parse_ns(value)
    except ValueError as exc:
        raise FilterError(f"timestamp: {exc}") from None


def _severity(value: str) -> int:
    if value.upper() not in SEVERITIES:
        raise FilterError(f"{value!r} is not a severity; use one of {', '.join(SEVERITIES)}")
    return severity_rank(value)


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
    for node in _factors(_Parser(text).parse()):
        if node[0] != "term":
            condition, floor = _condition(node)
            found.conditions.append(condition)
            if floor is not None:
                found.floors.append(floor)
            continue
        match = node[1]
        assert isinstance(match, re.Match)
        term = match.group().strip()
        name, op, value = match["field"], match["op"], _value(match["value"])
        label = name.removeprefix("resource.labels.") if name.startswith("resource.labels.") else None
        if name in ("severity", "timestamp") and op in _OPS:
            if name == "severity":
                found.severity.append((_OPS[op], _severity(value)))
            else:
                found.timestamp.append((op, _timestamp(value)))
        elif name == "insertId" and op in _OPS:
            found.conditions.append(_entry_term(match)[0])
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
