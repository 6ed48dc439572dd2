"""The search space of a study: which parameters a trial has, the values each takes, and its arguments.

A trial gets its values as `--ID=VALUE` arguments after the job's own (docs/reference/vertex.md §1.3):
integers as whole numbers, discrete values without a trailing `.0` when whole (so `type=int` flags read them),
doubles in Python's shortest round-trip form, categories as written. Conditional parameters exist only while
their parent takes one of the values they name.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator, Mapping, Sequence

from vertexdist.wire.study import Conditional, Parameter, Value

Assignment = dict[str, Value]


def _same(a: Value, b: Value) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return str(a) == str(b)
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


def applies(conditional: Conditional, parent_value: Value) -> bool:
    return any(_same(parent_value, v) for v in conditional.parent_values)


def active_parameters(parameters: Sequence[Parameter], values: Mapping[str, Value]) -> list[Parameter]:
    """The parameters a trial with `values` has: every top-level one, and children whose parent matches."""
    found: list[Parameter] = []
    for parameter in parameters:
        found.append(parameter)
        if parameter.id in values:
            children = [c.parameter for c in parameter.conditionals if applies(c, values[parameter.id])]
            found += active_parameters(children, values)
    return found


def format_value(parameter: Parameter, value: Value) -> str:
    if parameter.kind == "categorical":
        return str(value)
    number = float(value)
    if parameter.kind == "integer" or (parameter.kind == "discrete" and number.is_integer()):
        return str(round(number))
    return repr(number)


def trial_args(parameters: Sequence[Parameter], values: Mapping[str, Value]) -> list[str]:
    """The arguments a trial appends to every pool's args: `--ID=VALUE` per parameter it has."""
    return [
        f"--{p.id}={format_value(p, values[p.id])}"
        for p in active_parameters(parameters, values)
        if p.id in values
    ]


def grid_values(parameter: Parameter) -> list[Value]:
    if parameter.kind == "integer":
        assert parameter.min is not None and parameter.max is not None
        return list(range(int(parameter.min), int(parameter.max) + 1))
    if parameter.kind == "double":
        raise ValueError(f"{parameter.id} is a double parameter: it has no grid")
    return list(parameter.values)


def grid_points(parameters: Sequence[Parameter]) -> Iterator[Assignment]:
    """Every point of the grid once, the first parameter varying slowest; children only under their parent."""
    if not parameters:
        yield {}
        return
    first, rest = parameters[0], parameters[1:]
    for value in grid_values(first):
        children = [c.parameter for c in first.conditionals if applies(c, value)]
        for below in itertools.product(*(list(grid_points([child])) for child in children)):
            head: Assignment = {first.id: value}
            for part in below:
                head.update(part)
            for tail in grid_points(rest):
                yield {**head, **tail}


def grid_size(parameters: Sequence[Parameter]) -> int:
    return sum(1 for _ in grid_points(parameters))


def _log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def sample_value(parameter: Parameter, rng: random.Random) -> Value:
    """One value drawn as the parameter's scale spreads them (log: even in log space; reverse log: dense
    near the top of the range)."""
    if parameter.kind in ("categorical", "discrete"):
        return rng.choice(list(parameter.values))
    assert parameter.min is not None and parameter.max is not None
    low, high = parameter.min, parameter.max
    if parameter.scale == "UNIT_LOG_SCALE":
        drawn = _log_uniform(rng, low, high)
    elif parameter.scale == "UNIT_REVERSE_LOG_SCALE":
        drawn = low + high - _log_uniform(rng, low, high)
    else:
        drawn = rng.uniform(low, high)
    if parameter.kind == "integer":
        return int(min(high, max(low, round(drawn))))
    return min(high, max(low, drawn))


def sample_point(parameters: Sequence[Parameter], rng: random.Random) -> Assignment:
    values: Assignment = {}
    for parameter in parameters:
        values[parameter.id] = sample_value(parameter, rng)
        children = [c.parameter for c in parameter.conditionals if applies(c, values[parameter.id])]
        values.update(sample_point(children, rng))
    return values
