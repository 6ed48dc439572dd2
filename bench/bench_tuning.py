"""Benchmark: the tuning study (vertexdist/tuning) on an objective with a known optimum, with function trials
run through the very loop local-run and the emulator use (`TuningRun`), not processes.

Each function trial reports its value once per step in the cloudml-hypertune file format, advancing one step
each time the loop polls it; stopping it ends it at once. The objective f, over x (linear), lr (log) and units
(integer), has its maximum 1.0 at x=0.37, lr=10^-2.5, units=40 (5% of the space scores f >= 0.95); at step s
a trial reports f - 0.3/s.

1. Search: trials until one reaches within 5% of the optimum (f >= 0.95), bayesian (optuna TPE) against
   random, same budget, over several seeds. Ratio: random / bayesian (median trials to the target).
2. Early stopping: trial-steps spent with median stopping against without, random search with the same seed
   (so the same trials in the same order), and the best result of each. Ratio: with / without.

Run: .venv/bin/python bench/bench_tuning.py [--seeds N] [--budget N] [--steps N]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from typing import Any

from vertexdist.tuning.driver import TrialEnd, TuningRun
from vertexdist.tuning.study import Study, TrialRecord
from vertexdist.wire.study import Metric, Parameter, StudySpec, TuningJob

OPTIMUM = 1.0
TARGET = 0.95 * OPTIMUM
PARAMETERS = (
    Parameter("x", "double", min=0.0, max=1.0, scale="UNIT_LINEAR_SCALE"),
    Parameter("lr", "double", min=1e-5, max=1e-1, scale="UNIT_LOG_SCALE"),
    Parameter("units", "integer", min=1, max=64, scale="UNIT_LINEAR_SCALE"),
)


def objective(values: dict[str, Any]) -> float:
    x, lr, units = float(values["x"]), float(values["lr"]), float(values["units"])
    return OPTIMUM - (x - 0.37) ** 2 - ((math.log10(lr) + 2.5) / 4) ** 2 - ((units - 40) / 64) ** 2


class FunctionTrial:
    """A trial that is a function: one step per poll, reported as cloudml-hypertune would write it."""

    def __init__(self, trial: TrialRecord, steps: int, spent: list[int]) -> None:
        self.custom_job: str | None = None
        self._final = objective(trial.parameters)
        self._steps = steps
        self._step = 0
        self._stopped = False
        self._lines: list[str] = []
        self._spent = spent

    def poll(self) -> TrialEnd | None:
        if self._stopped:
            return TrialEnd(False, "stopped")
        if self._step == self._steps:
            return TrialEnd(True)
        self._step += 1
        self._spent[0] += 1
        value = self._final - 0.3 / self._step
        self._lines.append(
            json.dumps(
                {
                    "global_step": str(self._step),
                    "metric": str(value),
                    "timestamp": float(self._step),
                    "trial": "",
                    "checkpoint_path": "",
                }
            )
        )
        return None

    def metrics_text(self) -> str:
        return "\n".join(self._lines)

    def stop(self) -> None:
        self._stopped = True

    def wait(self, timeout: float) -> bool:
        return True


class FunctionLauncher:
    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.spent = [0]

    def start(self, trial: TrialRecord) -> FunctionTrial:
        return FunctionTrial(trial, self.steps, self.spent)


def run_study(
    algorithm: str, seed: int, budget: int, steps: int, *, stopping: str = "none", parallel: int = 1
) -> tuple[Study, int]:
    spec = StudySpec(
        metrics=(Metric("metric", "MAXIMIZE"),),
        parameters=PARAMETERS,
        algorithm=algorithm,
        stopping=stopping,  # type: ignore[arg-type]
    )
    study = Study(TuningJob("bench", spec, budget, parallel, 0, {}), seed=seed)
    launcher = FunctionLauncher(steps)
    TuningRun(study, launcher, poll_s=0.0).run()
    return study, launcher.spent[0]


def trials_to_target(study: Study) -> int | None:
    """The number of the first trial whose values score within 5% of the optimum (None: none did)."""
    for trial in study.trials.values():
        if trial.state == "SUCCEEDED" and objective(trial.parameters) >= TARGET:
            return int(trial.id)
    return None


def search_race(seeds: int, budget: int, steps: int) -> None:
    results: dict[str, list[int | None]] = {"RANDOM_SEARCH": [], "ALGORITHM_UNSPECIFIED": []}
    seconds: dict[str, float] = {}
    for algorithm in results:
        started = time.perf_counter()
        for seed in range(seeds):
            study, _ = run_study(algorithm, seed, budget, steps)
            results[algorithm].append(trials_to_target(study))
        seconds[algorithm] = time.perf_counter() - started

    def median(values: list[int | None]) -> float:
        # A run that never reached the target counts as needing one trial more than the budget.
        return statistics.median(v if v is not None else budget + 1 for v in values)

    names = {"RANDOM_SEARCH": "random", "ALGORITHM_UNSPECIFIED": "bayesian (optuna TPE)"}
    print(f"1. trials to within 5% of the optimum (f >= {TARGET}), budget {budget}, {seeds} seeds")
    for algorithm, found in results.items():
        reached = sum(v is not None for v in found)
        print(
            f"   {names[algorithm]:<22} median {median(found):5.1f} trials, reached in {reached}/{seeds} runs"
            f"   per run: {found}   ({seconds[algorithm] / seeds:.2f} s a run)"
        )
    ratio = median(results["RANDOM_SEARCH"]) / median(results["ALGORITHM_UNSPECIFIED"])
    print(f"   ratio random / bayesian (median trials to the target): {ratio:.2f}")


def stopping_race(seeds: int, budget: int, steps: int) -> None:
    spent: dict[str, list[int]] = {"none": [], "median": []}
    best: dict[str, list[float]] = {"none": [], "median": []}
    for stopping in spent:
        for seed in range(seeds):
            study, steps_spent = run_study(
                "RANDOM_SEARCH", seed, budget, steps, stopping=stopping, parallel=4
            )
            winner = study.best()
            spent[stopping].append(steps_spent)
            best[stopping].append(objective(winner.parameters) if winner else float("nan"))
    same = all(math.isclose(a, b) for a, b in zip(best["none"], best["median"], strict=True))
    total = {k: sum(v) for k, v in spent.items()}
    print(
        f"2. median stopping, random search, {budget} trials of {steps} steps, 4 in parallel, {seeds} seeds"
    )
    print(f"   trial-steps without stopping {total['none']}, with median stopping {total['median']}")
    rounded = [round(b, 4) for b in best["median"]]
    print(f"   best result the same in every run: {same}   (best f per run: {rounded})")
    print(f"   ratio trial-steps with / without stopping: {total['median'] / total['none']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    search_race(args.seeds, args.budget, args.steps)
    stopping_race(args.seeds, args.budget, args.steps)


if __name__ == "__main__":
    main()
