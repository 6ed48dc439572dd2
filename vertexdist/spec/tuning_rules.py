"""The rules of a template's `tuning:` section: what Vertex refuses in a StudySpec (errors) and what it runs
but is probably a mistake (warnings). Each rule is a small function over the template; none runs without a
`tuning:` section. Sources: the StudySpec and HyperparameterTuningJob reference
(https://cloud.google.com/vertex-ai/docs/reference/rest/v1/StudySpec) and the SDK's `hyperparameter_tuning`.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from vertexdist.spec.findings import Finding

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate
    from vertexdist.spec.tuning import ParameterSpec, TuningSpec

GRID_TYPES = ("integer", "discrete", "categorical")
MAX_DISCRETE_VALUES = 1000  # StudySpec.ParameterSpec.DiscreteValueSpec: "not more than 1,000 values"
MIN_DISCRETE_GAP = 1e-10  # "in increasing order and at least 1e-10 apart"
# A flag name Vertex can pass as `--NAME=VALUE` and argparse can read back.
_FLAG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def _where(name: str, field: str = "") -> str:
    return f"tuning.parameter_spec.{name}" + (f".{field}" if field else "")


def _parameters(t: JobTemplate) -> Iterator[tuple[str, ParameterSpec]]:
    if t.tuning is not None:
        yield from t.tuning.parameter_spec.items()


def grid_size(tuning: TuningSpec) -> int | None:
    """How many points a grid search visits; None when a parameter (double) has no grid."""
    size = 1
    for spec in tuning.parameter_spec.values():
        if spec.type == "integer":
            assert spec.min is not None and spec.max is not None
            size *= max(0, int(spec.max) - int(spec.min) + 1)
        elif spec.type in ("discrete", "categorical"):
            size *= len(spec.values or ())
        else:
            return None
    return size


def metric_tags_named(t: JobTemplate) -> Iterator[Finding]:
    if t.tuning is None:
        return
    for tag in t.tuning.metric_spec:
        if not tag.strip():
            yield Finding(
                "tuning.metric_spec",
                "a metric tag is empty",
                "use the tag the trainer reports with cloudml-hypertune, e.g. val_accuracy",
                on_key=True,
            )


def one_metric_steers_locally(t: JobTemplate) -> Iterator[Finding]:
    if t.tuning is not None and len(t.tuning.metric_spec) > 1:
        first = next(iter(t.tuning.metric_spec))
        yield Finding(
            "tuning.metric_spec",
            f"{len(t.tuning.metric_spec)} metrics: Vertex runs a multi-objective study, but local-run and the"
            f" emulator search, stop and pick the best trial by the first one only ({first})",
            "keep one metric to get the same best trial everywhere",
            "warning",
        )


def parameter_names_are_flags(t: JobTemplate) -> Iterator[Finding]:
    for name, _spec in _parameters(t):
        if not _FLAG_NAME.match(name):
            yield Finding(
                _where(name),
                f"parameter name {name!r} cannot be passed as `--{name}=VALUE`",
                "use letters, digits, _, - and ., starting with a letter, e.g. learning_rate",
                on_key=True,
            )


def ranges_ordered(t: JobTemplate) -> Iterator[Finding]:
    for name, spec in _parameters(t):
        if spec.min is not None and spec.max is not None and not spec.min < spec.max:
            yield Finding(
                _where(name, "max"),
                f"max ({spec.max:g}) must be greater than min ({spec.min:g})",
                "swap them, or use a categorical or discrete parameter for a single value",
            )


def log_scales_positive(t: JobTemplate) -> Iterator[Finding]:
    for name, spec in _parameters(t):
        if spec.scale not in ("log", "reverse_log"):
            continue
        if spec.min is not None and spec.min <= 0:
            yield Finding(
                _where(name, "min"),
                f"a {spec.scale} scale needs min > 0, got {spec.min:g}",
                "raise min above 0 (e.g. 1e-5), or use scale: linear",
            )
        if spec.type == "discrete" and any(float(v) <= 0 for v in spec.values or ()):
            yield Finding(
                _where(name, "values"),
                f"a {spec.scale} scale needs every value > 0",
                "remove the values at or below 0, or use scale: linear",
            )


def discrete_values_increasing(t: JobTemplate) -> Iterator[Finding]:
    for name, spec in _parameters(t):
        if spec.type != "discrete":
            continue
        values = [float(v) for v in spec.values or ()]
        if len(values) > MAX_DISCRETE_VALUES:
            yield Finding(
                _where(name, "values"),
                f"{len(values)} values; Vertex takes at most {MAX_DISCRETE_VALUES}",
                "use an integer or double parameter for a range this wide",
            )
        if any(b - a < MIN_DISCRETE_GAP for a, b in itertools.pairwise(values)):
            shown = ", ".join(f"{v:g}" for v in sorted(set(values)))
            yield Finding(
                _where(name, "values"),
                "discrete values must be in increasing order, each different (at least 1e-10 apart)",
                f"write them as [{shown}]",
            )


def categories_unique(t: JobTemplate) -> Iterator[Finding]:
    for name, spec in _parameters(t):
        if spec.type == "categorical" and len(set(spec.values or ())) != len(spec.values or ()):
            repeated = sorted({v for v in spec.values or () if list(spec.values or ()).count(v) > 1})
            yield Finding(
                _where(name, "values"),
                f"categories repeat: {', '.join(map(str, repeated))}",
                "list each category once",
            )


def grid_needs_discrete_parameters(t: JobTemplate) -> Iterator[Finding]:
    if t.tuning is None or t.tuning.search_algorithm != "grid":
        return
    for name, spec in t.tuning.parameter_spec.items():
        if spec.type not in GRID_TYPES:
            yield Finding(
                _where(name, "type"),
                f"grid search takes only integer, discrete and categorical parameters; {name} is {spec.type}",
                "make it discrete with the values to try, or use search_algorithm: random or bayesian",
            )


def grid_size_matches_trials(t: JobTemplate) -> Iterator[Finding]:
    if t.tuning is None or t.tuning.search_algorithm != "grid":
        return
    size = grid_size(t.tuning)
    count = t.tuning.max_trial_count
    if size is None or size == count:
        return
    if count > size:
        yield Finding(
            "tuning.max_trial_count",
            f"the grid has {size} points; the job ends after {size} trials, not {count}",
            f"set max_trial_count: {size}",
            "warning",
        )
    else:
        yield Finding(
            "tuning.max_trial_count",
            f"{count} trials cover only {count} of the grid's {size} points",
            f"set max_trial_count: {size} to try every point, or use search_algorithm: random",
            "warning",
        )


def parallel_within_max(t: JobTemplate) -> Iterator[Finding]:
    if t.tuning is not None and t.tuning.parallel_trial_count > t.tuning.max_trial_count:
        yield Finding(
            "tuning.parallel_trial_count",
            f"parallel_trial_count ({t.tuning.parallel_trial_count}) is above max_trial_count"
            f" ({t.tuning.max_trial_count})",
            f"set parallel_trial_count to at most {t.tuning.max_trial_count}",
        )


def failed_within_max(t: JobTemplate) -> Iterator[Finding]:
    if t.tuning is not None and t.tuning.max_failed_trial_count > t.tuning.max_trial_count:
        yield Finding(
            "tuning.max_failed_trial_count",
            f"max_failed_trial_count ({t.tuning.max_failed_trial_count}) is above max_trial_count"
            f" ({t.tuning.max_trial_count})",
            f"set it to at most {t.tuning.max_trial_count}, or 0 for Vertex's own rule",
        )


def stopping_needs_finished_trials(t: JobTemplate) -> Iterator[Finding]:
    tuning = t.tuning
    if tuning is None or tuning.early_stopping == "none":
        return
    if tuning.parallel_trial_count >= tuning.max_trial_count:
        yield Finding(
            "tuning.early_stopping",
            f"{tuning.early_stopping} stopping compares a trial with finished ones, but all"
            f" {tuning.max_trial_count} trials run at once: none has finished while the others run",
            f"lower parallel_trial_count (e.g. {max(1, math.ceil(tuning.max_trial_count / 4))}),"
            " or set early_stopping: none",
            "warning",
        )


def parameters_not_in_trainer_args(t: JobTemplate) -> Iterator[Finding]:
    for name, _spec in _parameters(t):
        flag = f"--{name}"
        if any(arg == flag or arg.startswith(flag + "=") for arg in t.trainer.args):
            yield Finding(
                "trainer.args",
                f"trainer.args already passes {flag}; each trial appends {flag}=VALUE after it,"
                " which argparse reads as the last word",
                f"remove {flag} from trainer.args: the tuning job sets it",
                "warning",
            )


TuningRule = Callable[["JobTemplate"], Iterator[Finding]]

TUNING_RULES: tuple[TuningRule, ...] = (
    metric_tags_named,
    one_metric_steers_locally,
    parameter_names_are_flags,
    ranges_ordered,
    log_scales_positive,
    discrete_values_increasing,
    categories_unique,
    grid_needs_discrete_parameters,
    grid_size_matches_trials,
    parallel_within_max,
    failed_within_max,
    stopping_needs_finished_trials,
    parameters_not_in_trainer_args,
)
