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


# --- the metadata and TensorBoard list filters -----------------------------------------------------------
# https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.metadataStores.contexts/list:
# `FIELD="VALUE"` and `!=` comparisons, `FIELD:"A","B"` (has any), `FUNCTION("ARG")` (in_context), NOT,
# parentheses, and AND/OR, as the SDK's `metadata/utils._make_filter_string` writes them.
_TOKEN = re.compile(r'\s*(?:(\()|(\))|(,)|(!=|=|:)|("(?:[^"\\]|\\.)*")|([\w.\-/@]+))')
FieldGetter = Callable[[dict[str, Any], str], Any]
# Parentheses and NOTs a filter may nest: the parser and the predicate it builds recurse once per level, so
# a deeper filter (5,000 parentheses) is refused before either runs, whatever the recursion limit is.
MAX_FILTER_DEPTH = 64
Function = Callable[[dict[str, Any], str], bool]


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    at = 0
    while at < len(text):
        if text[at:].strip() == "":
            break
        match = _TOKEN.match(text, at)
        if not match:
            raise ValueError(f"filter: cannot read {text[at : at + 20]!r} (at character {at + 1})")
        at = match.end()
        kinds = ("(", ")", ",", "op", "str", "word")
        kind = next(k for k, group in zip(kinds, match.groups(), strict=True) if group is not None)
        value = match.group(kinds.index(kind) + 1)
        out.append((kind, value[1:-1].replace('\\"', '"') if kind == "str" else value))
    return out


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


class _Parser:
    def __init__(self, text: str, field: FieldGetter, functions: dict[str, Function]) -> None:
        self.tokens = _tokens(text)
        self.at = 0
        self.field = field
        self.functions = functions

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, kind: str) -> str:
        token = self.peek()
        if token is None or token[0] != kind:
            seen = "the end" if token is None else repr(token[1])
            raise ValueError(f"filter: expected {kind} but found {seen}")
        self.at += 1
        return token[1]

    def keyword(self, word: str) -> bool:
        token = self.peek()
        if token is not None and token == ("word", word):
            self.at += 1
            return True
        return False

    def expression(self) -> Predicate:
        parts = [self.conjunction()]
        while self.keyword("OR"):
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else (lambda r: any(p(r) for p in parts))

    def conjunction(self) -> Predicate:
        parts = [self.unary()]
        while self.keyword("AND"):
            parts.append(self.unary())
        return parts[0] if len(parts) == 1 else (lambda r: all(p(r) for p in parts))

    def unary(self) -> Predicate:
        if self.keyword("NOT"):
            inner = self.unary()
            return lambda r: not inner(r)
        token = self.peek()
        if token is not None and token[0] == "(":
            self.at += 1
            inner = self.expression()
            self.take(")")
            return inner
        return self.term()

    def value(self) -> str:
        token = self.peek()
        if token is None or token[0] not in ("str", "word"):
            seen = "the end" if token is None else repr(token[1])
            raise ValueError(f"filter: expected a value but found {seen}")
        self.at += 1
        return token[1]

    def term(self) -> Predicate:
        name = self.take("word")
        token = self.peek()
        if token is not None and token[0] == "(":
            self.at += 1
            arg = self.value()
            self.take(")")
            function = self.functions.get(name)
            if function is None:
                raise ValueError(f"filter: function {name!r} is not supported (use {sorted(self.functions)})")
            return lambda r: function(r, arg)
        op = self.take("op")
        values = [self.value()]
        while op == ":" and self.peek() == (",", ","):
            self.at += 1
            values.append(self.value())
        self.field({}, name)  # an unknown field is refused now, not on the first resource
        field = self.field

        def compare(resource: dict[str, Any]) -> bool:
            actual = field(resource, name)
            if op == ":":
                found = actual if isinstance(actual, list) else [actual]
                return any(_text(a) == v or (v == "*" and a) for a in found for v in values)
            return (_text(actual) == values[0]) == (op == "=")

        return compare


def _depth(tokens: list[tuple[str, str]]) -> int:
    """How deep the parser would recurse: open parentheses, plus the NOTs in a row before each operand."""
    deepest = opened = nots = 0
    for kind, value in tokens:
        if kind == "(":
            opened += 1
        elif kind == ")":
            opened -= 1
        if (kind, value) == ("word", "NOT"):
            nots += 1
        elif kind != "(":
            nots = 0 if kind != ")" else nots
        deepest = max(deepest, opened + nots)
    return deepest


def parse_expression(text: str, field: FieldGetter, functions: dict[str, Function]) -> Predicate:
    """A predicate for a metadata-style filter; `field(resource, name)` reads a field (raising ValueError
    for names it does not know), `functions` are the `NAME("ARG")` terms. Raises ValueError naming the
    problem."""
    if not text.strip():
        return lambda _resource: True
    parser = _Parser(text, field, functions)
    depth = _depth(parser.tokens)
    if depth > MAX_FILTER_DEPTH:
        raise ValueError(
            f"filter: nests {depth} levels deep (parentheses and NOTs); at most {MAX_FILTER_DEPTH}"
        )
    predicate = parser.expression()
    rest = parser.peek()
    if rest is not None:
        raise ValueError(f"filter: unexpected {rest[1]!r} after a complete expression")
    return predicate
