"""Where the next trial looks: grid (every point once, in order), random (seeded, reproducible) and bayesian.

Vertex's default algorithm is Bayesian optimisation in Vizier. Here `BayesianSearch` is a local stand-in on
optuna's TPE sampler (a real optimisation library, imported only when a bayesian study starts), with the
constant-liar rule so that parallel trials do not all ask for the same point. A reverse-log scale is searched
linearly by it (optuna has no such scale); grid and random honour every scale.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from vertexdist.tuning.space import Assignment, applies, grid_points, sample_point
from vertexdist.wire.study import Parameter, StudySpec


class Search(Protocol):
    def suggest(self, trial_id: str) -> Assignment | None:
        """The values of a new trial, or None when the search has nothing left to try (a finished grid)."""
        ...

    def observe(self, trial_id: str, objective: float | None) -> None:
        """A trial's final objective value, or None when it failed or reported nothing."""
        ...


class GridSearch:
    def __init__(self, parameters: Sequence[Parameter]) -> None:
        self._points: Iterator[Assignment] = grid_points(parameters)

    def suggest(self, trial_id: str) -> Assignment | None:
        return next(self._points, None)

    def observe(self, trial_id: str, objective: float | None) -> None:
        pass


class RandomSearch:
    """Independent draws; the same seed gives the same trials in the same order."""

    def __init__(self, parameters: Sequence[Parameter], seed: int | None) -> None:
        self._parameters = parameters
        self._rng = random.Random(seed)

    def suggest(self, trial_id: str) -> Assignment | None:
        return sample_point(self._parameters, self._rng)

    def observe(self, trial_id: str, objective: float | None) -> None:
        pass


def startup_trials(max_trial_count: int) -> int:
    """Random trials TPE takes before it models the objective: a quarter of the budget, 3 to 10."""
    return max(3, min(10, max_trial_count // 4))


class BayesianSearch:
    """optuna's TPE sampler through its ask-and-tell interface, one optuna trial per Vertex trial."""

    def __init__(self, study: StudySpec, *, seed: int | None, max_trial_count: int) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        with warnings.catch_warnings():
            # multivariate, group and constant_liar are marked experimental; they are what fits here.
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(
                seed=seed,
                n_startup_trials=startup_trials(max_trial_count),
                multivariate=True,
                group=any(p.conditionals for p in study.parameters),
                constant_liar=True,
            )
        direction = "maximize" if study.objective.maximize else "minimize"
        self._optuna = optuna
        self._study = optuna.create_study(direction=direction, sampler=sampler)
        self._parameters = study.parameters
        self._asked: dict[str, Any] = {}

    def _suggest_into(self, trial: Any, parameters: Sequence[Parameter], values: Assignment) -> None:
        for p in parameters:
            if p.kind == "double":
                assert p.min is not None and p.max is not None
                values[p.id] = trial.suggest_float(p.id, p.min, p.max, log=p.scale == "UNIT_LOG_SCALE")
            elif p.kind == "integer":
                assert p.min is not None and p.max is not None
                low, high = int(p.min), int(p.max)
                values[p.id] = trial.suggest_int(p.id, low, high, log=p.scale == "UNIT_LOG_SCALE")
            else:
                values[p.id] = trial.suggest_categorical(p.id, list(p.values))
            children = [c.parameter for c in p.conditionals if applies(c, values[p.id])]
            self._suggest_into(trial, children, values)

    def suggest(self, trial_id: str) -> Assignment | None:
        trial = self._study.ask()
        values: Assignment = {}
        self._suggest_into(trial, self._parameters, values)
        self._asked[trial_id] = trial
        return values

    def observe(self, trial_id: str, objective: float | None) -> None:
        trial = self._asked.pop(trial_id, None)
        if trial is None:
            return
        if objective is None:
            self._study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
        else:
            self._study.tell(trial, objective)


def make_search(study: StudySpec, *, seed: int | None, max_trial_count: int) -> Search:
    """The search the study's algorithm names (ALGORITHM_UNSPECIFIED is Vertex's Bayesian default)."""
    if study.algorithm == "GRID_SEARCH":
        return GridSearch(study.parameters)
    if study.algorithm == "RANDOM_SEARCH":
        return RandomSearch(study.parameters, seed)
    return BayesianSearch(study, seed=seed, max_trial_count=max_trial_count)
