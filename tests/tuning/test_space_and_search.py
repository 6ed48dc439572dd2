"""The search space and the searches: a grid visits every point exactly once, random search with a seed
gives the same trials again, bayesian search (optuna) suggests inside the space; trial args as Vertex's."""

from __future__ import annotations

import itertools
import math

from vertexdist.tuning.search import BayesianSearch, GridSearch, RandomSearch, make_search
from vertexdist.tuning.space import grid_points, grid_size, sample_value, trial_args
from vertexdist.wire.study import Conditional, Metric, Parameter, StudySpec

UNITS = Parameter("units", "integer", min=1, max=3)
OPT = Parameter("opt", "categorical", values=("adam", "sgd"))
BATCH = Parameter("batch", "discrete", values=(16.0, 32.0, 0.5))
LR = Parameter("lr", "double", min=1e-4, max=1.0, scale="UNIT_LOG_SCALE")


def test_grid_covers_the_grid_exactly_once() -> None:
    search = GridSearch([UNITS, OPT, BATCH])
    seen = []
    while (point := search.suggest(str(len(seen) + 1))) is not None:
        seen.append(tuple(sorted(point.items())))
    expected = {
        tuple(sorted({"units": u, "opt": o, "batch": b}.items()))
        for u, o, b in itertools.product([1, 2, 3], OPT.values, BATCH.values)
    }
    assert len(seen) == len(set(seen)) == 18 and set(seen) == expected
    assert grid_size([UNITS, OPT, BATCH]) == 18


def test_grid_of_conditional_parameters_visits_children_only_under_their_parent() -> None:
    opt = Parameter(
        "opt",
        "categorical",
        values=("adam", "sgd"),
        conditionals=(Conditional(("adam",), Parameter("beta", "discrete", values=(0.9, 0.99))),),
    )
    points = list(grid_points([opt]))
    assert points == [{"opt": "adam", "beta": 0.9}, {"opt": "adam", "beta": 0.99}, {"opt": "sgd"}]


def test_random_search_with_a_seed_is_reproducible() -> None:
    def draws(seed: int) -> list[dict[str, object]]:
        search = RandomSearch([UNITS, OPT, LR], seed)
        return [search.suggest(str(i)) or {} for i in range(20)]

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)
    for point in draws(7):
        assert 1 <= int(point["units"]) <= 3 and point["opt"] in OPT.values  # type: ignore[call-overload]
        assert 1e-4 <= float(point["lr"]) <= 1.0  # type: ignore[arg-type]


def test_scales_spread_samples_as_named() -> None:
    import random

    rng = random.Random(0)
    log = [float(sample_value(LR, rng)) for _ in range(2000)]
    reversed_log = Parameter("r", "double", min=1e-4, max=1.0, scale="UNIT_REVERSE_LOG_SCALE")
    reverse = [float(sample_value(reversed_log, rng)) for _ in range(2000)]
    # log: as many draws below 0.01 as above (the geometric middle); reverse log: dense near the top.
    assert 0.4 < sum(v < 0.01 for v in log) / len(log) < 0.6
    assert sum(v > 0.99 for v in reverse) / len(reverse) > 0.4


def test_trial_args_are_vertex_style_flags() -> None:
    args = trial_args([UNITS, BATCH, LR, OPT], {"units": 2, "batch": 32.0, "lr": 0.001, "opt": "sgd"})
    assert args == ["--units=2", "--batch=32", "--lr=0.001", "--opt=sgd"]
    assert trial_args([BATCH], {"batch": 0.5}) == ["--batch=0.5"]


def test_bayesian_search_finds_a_better_region_than_its_first_guesses() -> None:
    study = StudySpec(
        metrics=(Metric("y", "MAXIMIZE"),), parameters=(Parameter("x", "double", min=0, max=1),)
    )
    search = make_search(study, seed=0, max_trial_count=30)
    assert isinstance(search, BayesianSearch)
    values = []
    for i in range(30):
        x = float((search.suggest(str(i)) or {})["x"])  # type: ignore[arg-type]
        assert 0 <= x <= 1
        y = -((x - 0.8) ** 2)
        values.append(y)
        search.observe(str(i), y)
    assert max(values[10:]) > max(values[:10]) or math.isclose(max(values), 0, abs_tol=1e-3)
