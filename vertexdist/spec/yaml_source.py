"""Safe YAML loading that remembers where every key and value sits (line and column, 1-based).

Only PyYAML's safe loader is used, so tags such as `!!python/object` are rejected, never executed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

try:  # libyaml is several times faster; the pure-Python loader gives the same results.
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Position:
    line: int
    col: int


@dataclass
class SourceMap:
    """Where each path of the document was written: the key (for mappings) and the value."""

    keys: dict[Loc, Position] = field(default_factory=dict)
    values: dict[Loc, Position] = field(default_factory=dict)

    def find(self, loc: Loc, *, prefer_key: bool = False) -> Position:
        """The position of `loc`, or of its nearest written parent (a missing field points at its parent)."""
        probe = tuple(loc)
        while True:
            if prefer_key and probe in self.keys:
                return self.keys[probe]
            if probe in self.values:
                return self.values[probe]
            if not probe:
                return Position(1, 1)
            probe = probe[:-1]


class YamlSourceError(Exception):
    """The text is not a YAML mapping we can read; carries the position and a hint."""

    def __init__(self, message: str, position: Position, hint: str, path: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.position = position
        self.hint = hint
        self.path = path


def _position(node: yaml.Node) -> Position:
    return Position(node.start_mark.line + 1, node.start_mark.column + 1)


def _walk(node: yaml.Node, loc: Loc, source: SourceMap, seen_nodes: set[int]) -> None:
    source.values[loc] = _position(node)
    # An alias points at a node already walked: walking it again could loop (a recursive anchor) or
    # blow up (nested aliases); errors under it point at the alias instead.
    if id(node) in seen_nodes:
        return
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, Position] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise YamlSourceError(
                    "a mapping key must be a plain name", _position(key_node), "write `name: value`"
                )
            key = key_node.value
            if key in seen:
                first = seen[key]
                dotted = ".".join(str(p) for p in (*loc, key))
                raise YamlSourceError(
                    f"duplicate key {key!r} (first written at line {first.line})",
                    _position(key_node),
                    "keep one of the two; YAML would silently use the last one",
                    dotted,
                )
            seen[key] = _position(key_node)
            source.keys[(*loc, key)] = _position(key_node)
            _walk(value_node, (*loc, key), source, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*loc, index), source, seen_nodes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def check_expansion(root: yaml.Node, *, max_values: int, max_depth: int) -> None:
    """Refuse a document whose aliases expand past `max_values` values or `max_depth` levels, or loop.

    The composed document is a graph (an alias is a second edge to its anchor's node); this counts what
    constructing it would expand, without expanding it: each node's size once, from its children's.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        children = _children(node)
        if children_done:
            open_nodes.discard(key)
            size[key] = min(max_values + 1, 1 + sum(size[id(c)] for c in children))
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            if size[key] > max_values:
                raise YamlSourceError(
                    f"this value expands to more than {max_values:,} values through YAML aliases (*name)",
                    _position(node),
                    "a template needs a few hundred values; write the values out instead of aliasing",
                )
            if depth[key] > max_depth:
                raise YamlSourceError(
                    f"values nest more than {max_depth} levels deep here",
                    _position(node),
                    "a template nests a few levels: check the brackets and indentation",
                )
            continue
        if key in size:
            continue
        open_nodes.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                raise YamlSourceError(
                    "a YAML alias refers to a value that holds the alias (a recursive alias)",
                    _position(child),
                    "an anchor (&name) cannot be used (*name) inside its own value",
                )
            if id(child) not in size:
                stack.append((child, False))


def load_yaml_document(
    text: str, *, max_values: int = 100_000, max_depth: int = 100
) -> tuple[Any, SourceMap]:
    """Parse one YAML document of any shape (None when empty); returns it and where each part was written."""
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
            if node is None:
                return None, SourceMap()
            check_expansion(node, max_values=max_values, max_depth=max_depth)
            source = SourceMap()
            _walk(node, (), source, set())
            data = loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        position = Position(mark.line + 1, mark.column + 1) if mark else Position(1, 1)
        problem = exc.problem or exc.context or "invalid YAML"
        hint = "check the indentation and quoting on this line"
        if "python/" in str(problem) or "could not determine a constructor" in str(problem):
            hint = "files are loaded safely: tags like !!python/... are not allowed; remove the tag"
        raise YamlSourceError(f"invalid YAML: {problem}", position, hint) from None
    except yaml.YAMLError as exc:
        raise YamlSourceError(f"invalid YAML: {exc}", Position(1, 1), "check the file is YAML") from None
    return data, source


def load_yaml_mapping(
    text: str, *, max_values: int = 100_000, max_depth: int = 100
) -> tuple[dict[str, Any], SourceMap]:
    """Parse one YAML document that must be a mapping; returns the data and where each part was written."""
    data, source = load_yaml_document(text, max_values=max_values, max_depth=max_depth)
    if data is None and not source.values:
        raise YamlSourceError("the template is empty", Position(1, 1), "start from a file in job_templates/")
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        raise YamlSourceError(
            f"the top level must be a mapping of fields, got {kind}",
            source.find(()),
            "write `display_name: ...`, `machine_type: ...` and the other fields at the top level",
        )
    return data, source
