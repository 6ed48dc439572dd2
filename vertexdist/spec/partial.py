"""The rules over a template whose fields did not all pass their own checks, so that one `validate` pass
reports every independent problem.

A broken part (a field, a dict item, the trainer's code) is set aside: replaced by its default or by a
placeholder, so the rest validates, and marked unreadable. The rules then read the template through a
guard: reading an unreadable part raises `Unreadable`, which ends that rule, keeping what it found before.
A finding a rule has yielded depends only on what it read before it, so no finding rests on a placeholder.
Items of a mapping come readable ones first, so a rule that goes item by item reports every readable item
before it stops at a broken one.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from vertexdist.spec.findings import Finding
from vertexdist.spec.yaml_source import Loc

# Fields whose values others are derived from: set aside together (the module is derived from the package or
# script; the boot disk's default from the machine).
_TOGETHER: dict[Loc, tuple[Loc, ...]] = {
    ("trainer", "package"): (("trainer", "package"), ("trainer", "script"), ("trainer", "module")),
    ("trainer", "script"): (("trainer", "package"), ("trainer", "script"), ("trainer", "module")),
    ("trainer", "module"): (("trainer", "package"), ("trainer", "script"), ("trainer", "module")),
    ("machine_type",): (("machine_type",), ("boot_disk_type",)),
}
_PLACEHOLDER_TEXT = "placeholder"
_NO_PLACEHOLDER = object()
_DROP = object()  # set aside by dropping: the field's default takes its place


class Unreadable(Exception):
    """A rule read a part of the template that failed its own check."""


def _unwrap_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _unwrap_optional(args[0])
    if get_origin(annotation) is not None and hasattr(annotation, "__metadata__"):
        return _unwrap_optional(get_args(annotation)[0])  # Annotated[X, ...]
    return annotation


def _model_class(annotation: Any) -> type[BaseModel] | None:
    annotation = _unwrap_optional(annotation)
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _placeholder(annotation: Any) -> Any:
    """A value that passes the field's own check; never shown to a rule (its place is unreadable)."""
    annotation = _unwrap_optional(annotation)
    origin = get_origin(annotation)
    if origin is Literal:
        return get_args(annotation)[0]
    if origin is dict:
        item = _placeholder(get_args(annotation)[1])
        return _NO_PLACEHOLDER if item is _NO_PLACEHOLDER else {_PLACEHOLDER_TEXT: item}
    if origin is list:
        return []
    model = _model_class(annotation)
    if model is not None:
        # A model whose fields check each other names a placeholder that passes (ParameterSpec).
        own = getattr(model, "PLACEHOLDER", None)
        if own is not None:
            return _copy(own)
        values = {}
        for name, field in model.model_fields.items():
            if field.is_required():
                values[name] = _placeholder(field.annotation)
                if values[name] is _NO_PLACEHOLDER:
                    return _NO_PLACEHOLDER
        return values
    simple: dict[Any, Any] = {str: _PLACEHOLDER_TEXT, int: 1, float: 1.0, bool: False}
    return simple.get(annotation, _NO_PLACEHOLDER)


def _repair_unit(model: type[BaseModel], loc: Loc) -> tuple[Loc, Any] | None:
    """Where to set a failed part aside, and what to put there (_DROP for the default), or None."""
    fields = model.model_fields
    if not loc or not isinstance(loc[0], str) or loc[0] not in fields:
        return None
    name, rest = loc[0], loc[1:]
    field = fields[name]
    annotation = _unwrap_optional(field.annotation)
    nested = _model_class(annotation)
    if rest and nested is not None:
        inner = _repair_unit(nested, rest)
        if inner is not None:
            return (name, *inner[0]), inner[1]
    elif rest and get_origin(annotation) is dict:
        value = _placeholder(get_args(annotation)[1])
        if value is not _NO_PLACEHOLDER:
            return (name, rest[0]), value
    if not field.is_required():
        return (name,), _DROP
    value = _placeholder(field.annotation)
    return None if value is _NO_PLACEHOLDER else ((name,), value)


def _put(data: dict[str, Any], loc: Loc, value: Any) -> bool:
    """Set (or drop, for _DROP) the value at `loc` of nested dicts; False when `loc` is not there to set."""
    node: Any = data
    for part in loc[:-1]:
        if not isinstance(node, dict) or part not in node:
            return value is _DROP
        node[part] = dict(node[part]) if isinstance(node[part], dict) else node[part]
        node = node[part]
    if not isinstance(node, dict):
        return value is _DROP
    if value is _DROP:
        node.pop(loc[-1], None)
    else:
        node[loc[-1]] = value
    return True


def _copy(data: Any) -> Any:
    return {k: _copy(v) for k, v in data.items()} if isinstance(data, dict) else data


def set_aside(
    model: type[BaseModel], data: dict[str, Any], errors: Iterable[ErrorDetails]
) -> tuple[dict[str, Any], set[Loc]] | None:
    """`data` with every part that failed (pydantic's `errors`) set aside, and the unreadable places;
    None when some failure cannot be set aside (then nothing more can be checked)."""
    repaired = _copy(data)
    unreadable: set[Loc] = set()
    for error in errors:
        loc: Loc = tuple(p for p in error["loc"] if p != "[key]")
        if error["type"] == "extra_forbidden":
            _put(repaired, loc, _DROP)  # an unknown key is no field: nothing reads it
            continue
        unit = _repair_unit(model, loc)
        if unit is None:
            return None
        place, value = unit
        for together in _TOGETHER.get(place, (place,)):
            if not _put(repaired, together, _DROP if together != place else value):
                return None
            unreadable.add(together)
    return repaired, unreadable


def _inside(loc: Loc, unreadable: set[Loc]) -> bool:
    return any(loc[: len(u)] == u for u in unreadable)


def _holds(loc: Loc, unreadable: set[Loc]) -> bool:
    return any(u[: len(loc)] == loc for u in unreadable)


def guard(value: Any, loc: Loc, unreadable: set[Loc]) -> Any:
    """`value` as the rules may read it: itself when nothing under it is unreadable, else a guarded view."""
    if _inside(loc, unreadable):
        raise Unreadable(".".join(map(str, loc)))
    if not _holds(loc, unreadable):
        return value
    if isinstance(value, BaseModel):
        return _GuardedModel(value, loc, unreadable)
    if isinstance(value, Mapping):
        return _GuardedMapping(value, loc, unreadable)
    return value


class _FieldsSet:
    """`model_fields_set` of a guarded model: whether an unreadable field was set is unknown."""

    def __init__(self, names: set[str], loc: Loc, unreadable: set[Loc]) -> None:
        self._names, self._loc, self._unreadable = names, loc, unreadable

    def __contains__(self, name: object) -> bool:
        if _inside((*self._loc, str(name)), self._unreadable):
            raise Unreadable(str(name))
        return name in self._names


class _GuardedModel:
    """A model whose attributes are read through `guard`; its properties and methods read through it too."""

    def __init__(self, target: BaseModel, loc: Loc, unreadable: set[Loc]) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_loc", loc)
        object.__setattr__(self, "_unreadable", unreadable)

    def __getattr__(self, name: str) -> Any:
        target: BaseModel = object.__getattribute__(self, "_target")
        loc: Loc = object.__getattribute__(self, "_loc")
        unreadable: set[Loc] = object.__getattribute__(self, "_unreadable")
        if name in type(target).model_fields:
            return guard(getattr(target, name), (*loc, name), unreadable)
        if name == "model_fields_set":
            return _FieldsSet(set(target.model_fields_set), loc, unreadable)
        static = inspect.getattr_static(type(target), name, None)
        if isinstance(static, property) and static.fget is not None:
            return static.fget(self)
        if inspect.isfunction(static):
            return types.MethodType(static, self)
        if isinstance(static, (classmethod, staticmethod)):
            return getattr(target, name)
        # Anything else (model_dump, private state) could show an unreadable part.
        raise Unreadable(".".join(map(str, (*loc, name))))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("the template is read-only")


class _GuardedMapping(Mapping[Any, Any]):
    """A mapping whose keys all read (in order) and whose broken items raise once reached, after the rest."""

    def __init__(self, target: Mapping[Any, Any], loc: Loc, unreadable: set[Loc]) -> None:
        self._target, self._loc, self._unreadable = target, loc, unreadable

    def __getitem__(self, key: Any) -> Any:
        return guard(self._target[key], (*self._loc, key), self._unreadable)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._target)

    def __len__(self) -> int:
        return len(self._target)

    def _readable_first(self) -> list[Any]:
        return sorted(self._target, key=lambda k: _inside((*self._loc, k), self._unreadable))

    def items(self) -> Iterator[tuple[Any, Any]]:  # type: ignore[override]
        return ((key, self[key]) for key in self._readable_first())

    def values(self) -> Iterator[Any]:  # type: ignore[override]
        return (self[key] for key in self._readable_first())


Rule = Callable[[Any], Iterator[Finding]]


def run_rules(rules: Iterable[Rule], template: BaseModel, unreadable: set[Loc]) -> list[Finding]:
    """Every finding each rule yields before it reads an unreadable part, in rule order."""
    view = guard(template, (), unreadable)
    findings: list[Finding] = []
    for rule in rules:
        try:
            for finding in rule(view):
                findings.append(finding)
        except Unreadable:
            continue
    return findings
