"""A task's `triggerPolicy.condition`: the CEL subset kfp's compiler writes for `dsl.If`/`Elif`/`Else`.

kfp compiles `dsl.If(step.output > 0.5)` to `inputs.parameter_values['pipelinechannel--step-Output'] > 0.5`,
combined with `&&`, `||` and `!(...)`, with `int(...)`/`double(...)`/`string(...)` casts around values
(kfp `compiler/compiler_utils.py`, Vertex evaluates them as CEL). This reads that subset and nothing else:
names other than `inputs.parameter_values[...]` and the casts are refused, so a condition never runs code.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any


class ConditionError(ValueError):
    """A condition outside the subset, or one naming an input the task does not have."""


_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
}
_CASTS: dict[str, Callable[[Any], Any]] = {
    "int": lambda v: int(float(v)) if isinstance(v, str) else int(v),
    "double": float,
    "string": lambda v: v if isinstance(v, str) else str(v),
    "bool": bool,
}


def to_python(text: str) -> str:
    """CEL's `&&`, `||`, `!` and `true`/`false`/`null` as Python's, outside string literals (pure)."""
    out: list[str] = []
    quote = ""
    i = 0
    while i < len(text):
        char = text[i]
        if quote:
            out.append(char)
            if char == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
            out.append(char)
        elif text.startswith("&&", i) or text.startswith("||", i):
            out.append(" and " if char == "&" else " or ")
            i += 1
        elif char == "!" and not text.startswith("!=", i):
            out.append(" not ")
        else:
            out.append(char)
        i += 1
    words = {"true": "True", "false": "False", "null": "None"}
    return "".join(out) if not any(w in text for w in words) else _replace_words("".join(out), words)


def _replace_words(text: str, words: Mapping[str, str]) -> str:
    import re

    parts = re.split(r"('(?:\\.|[^'])*'|\"(?:\\.|[^\"])*\")", text)
    for index in range(0, len(parts), 2):  # even parts are outside string literals
        for cel, python in words.items():
            parts[index] = re.sub(rf"\b{cel}\b", python, parts[index])
    return "".join(parts)


def evaluate(condition: str, parameter_values: Mapping[str, Any]) -> bool:
    """Whether `condition` holds for the task's resolved input parameters (pure)."""
    try:
        tree = ast.parse(to_python(condition).strip(), mode="eval")
    except SyntaxError as exc:
        raise ConditionError(f"condition {condition!r} cannot be read: {exc.msg}") from None
    return bool(_value(tree.body, parameter_values, condition))


def _value(node: ast.AST, values: Mapping[str, Any], text: str) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BoolOp):
        results = (_value(v, values, text) for v in node.values)
        return all(results) if isinstance(node.op, ast.And) else any(results)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        inner = _value(node.operand, values, text)
        return (not inner) if isinstance(node.op, ast.Not) else -inner
    if isinstance(node, ast.Compare):
        left = _value(node.left, values, text)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _value(right_node, values, text)
            compare = _COMPARE.get(type(op))
            if compare is None or not compare(left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.Subscript) and _is_parameter_values(node.value):
        key = _value(node.slice, values, text)
        if key not in values:
            raise ConditionError(f"condition {text!r} reads input {key!r}, which the task does not have")
        return values[key]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CASTS:
        if len(node.args) != 1 or node.keywords:
            raise ConditionError(f"condition {text!r}: {node.func.id}() takes one value")
        return _CASTS[node.func.id](_value(node.args[0], values, text))
    if isinstance(node, ast.List):
        return [_value(e, values, text) for e in node.elts]
    raise ConditionError(
        f"condition {text!r} uses {type(node).__name__}, outside the CEL subset kfp writes"
        " (comparisons, &&, ||, !, int()/double()/string() of inputs.parameter_values[...])"
    )


def _is_parameter_values(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "parameter_values"
        and isinstance(node.value, ast.Name)
        and node.value.id == "inputs"
    )
