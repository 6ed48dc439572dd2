"""The `tuning:` section: one test per rule (tuning_rules), the per-field checks of its models, and what
`validate` prints for it (file:line:col, the field path, a hint), like every other field."""

from __future__ import annotations

from typing import Any

import pytest

from vertexdist.spec import JobTemplate, check_template, inspect_file
from vertexdist.spec.rules import RULES
from vertexdist.spec.tuning_rules import TUNING_RULES, grid_size

from .conftest import BASE, WriteTemplate

CPU = {"machine_type": "n1-standard-4", "accelerator_type": None, "accelerator_count": 0, "replica_count": 1}
TUNING: dict[str, Any] = {
    "metric_spec": {"val_accuracy": "maximize"},
    "parameter_spec": {
        "lr": {"type": "double", "min": 0.0001, "max": 0.3, "scale": "log"},
        "units": {"type": "integer", "min": 16, "max": 128},
        "opt": {"type": "categorical", "values": ["adam", "sgd"]},
        "batch": {"type": "discrete", "values": [32, 64, 128]},
    },
    "max_trial_count": 24,
    "parallel_trial_count": 3,
}


def template(tuning: dict[str, Any] | None = None, **changes: Any) -> JobTemplate:
    data = {**BASE, **CPU, "tuning": {**TUNING, **(tuning or {})}, **changes}
    data = {k: v for k, v in data.items() if v is not None}
    return JobTemplate.model_validate(data, context={"skip_rules": True})


def found(severity: str, tuning: dict[str, Any] | None = None, **changes: Any) -> list[tuple[str, str, str]]:
    return [
        (f.path, f.message, f.hint or "")
        for f in check_template(template(tuning, **changes))
        if f.severity == severity and (f.path.startswith("tuning") or f.path == "trainer.args")
    ]


def params(**specs: dict[str, Any]) -> dict[str, Any]:
    return {"parameter_spec": specs}


def test_the_base_tuning_template_is_clean() -> None:
    assert found("error") == [] and found("warning") == []


def test_tuning_rules_are_registered_once_with_the_others() -> None:
    assert set(TUNING_RULES) <= set(RULES) and len(set(RULES)) == len(RULES)


def test_rule_metric_tags_named() -> None:
    [(path, message, hint)] = found("error", {"metric_spec": {"": "maximize"}})
    assert path == "tuning.metric_spec" and "empty" in message and "cloudml-hypertune" in hint


def test_rule_one_metric_steers_locally() -> None:
    [(path, message, _)] = found("warning", {"metric_spec": {"acc": "maximize", "loss": "minimize"}})
    assert path == "tuning.metric_spec" and "by the first one only (acc)" in message


def test_rule_parameter_names_are_flags() -> None:
    [(path, message, hint)] = found(
        "error", params(**{"learning rate": {"type": "double", "min": 0, "max": 1}})
    )
    assert path == "tuning.parameter_spec.learning rate" and "--learning rate=VALUE" in message
    assert "learning_rate" in hint


def test_rule_ranges_ordered() -> None:
    [(path, message, _)] = found("error", params(x={"type": "double", "min": 2, "max": 1}))
    assert path == "tuning.parameter_spec.x.max" and "greater than min (2)" in message


def test_rule_log_scales_positive() -> None:
    [(path, message, hint)] = found("error", params(x={"type": "double", "min": 0, "max": 1, "scale": "log"}))
    assert path == "tuning.parameter_spec.x.min" and "needs min > 0" in message and "1e-5" in hint
    [(path, _, _)] = found("error", params(x={"type": "discrete", "values": [0, 1], "scale": "reverse_log"}))
    assert path == "tuning.parameter_spec.x.values"


def test_rule_discrete_values_increasing() -> None:
    [(path, message, hint)] = found("error", params(b={"type": "discrete", "values": [64, 32, 64]}))
    assert path == "tuning.parameter_spec.b.values" and "increasing order" in message
    assert hint == "write them as [32, 64]"
    [(_, message, _)] = found("error", params(b={"type": "discrete", "values": list(range(1001))}))
    assert "at most 1000" in message


def test_rule_categories_unique() -> None:
    [(path, message, _)] = found("error", params(o={"type": "categorical", "values": ["a", "b", "a"]}))
    assert path == "tuning.parameter_spec.o.values" and "repeat: a" in message


def test_rule_grid_needs_discrete_parameters() -> None:
    [(path, message, hint)] = found("error", {"search_algorithm": "grid", "max_trial_count": 3})
    assert path == "tuning.parameter_spec.lr.type" and "lr is double" in message and "discrete" in hint


def test_rule_grid_size_matches_trials() -> None:
    grid = params(u={"type": "integer", "min": 1, "max": 3}, o={"type": "categorical", "values": ["a", "b"]})
    assert grid_size(template({"search_algorithm": "grid", **grid}).tuning) == 6  # type: ignore[arg-type]
    [(_, more, hint)] = found("warning", {"search_algorithm": "grid", "max_trial_count": 9, **grid})
    assert "has 6 points; the job ends after 6 trials, not 9" in more and hint == "set max_trial_count: 6"
    [(_, fewer, _)] = found("warning", {"search_algorithm": "grid", "max_trial_count": 4, **grid})
    assert "cover only 4 of the grid's 6 points" in fewer
    assert found("warning", {"search_algorithm": "grid", "max_trial_count": 6, **grid}) == []


def test_rule_parallel_within_max() -> None:
    [(path, message, hint)] = found("error", {"max_trial_count": 2, "parallel_trial_count": 3})
    assert path == "tuning.parallel_trial_count" and "above max_trial_count (2)" in message
    assert hint == "set parallel_trial_count to at most 2"


def test_rule_failed_within_max() -> None:
    [(path, message, _)] = found("error", {"max_trial_count": 4, "max_failed_trial_count": 5})
    assert path == "tuning.max_failed_trial_count" and "above max_trial_count (4)" in message


def test_rule_stopping_needs_finished_trials() -> None:
    [(path, message, _)] = found(
        "warning", {"early_stopping": "median", "max_trial_count": 3, "parallel_trial_count": 3}
    )
    assert path == "tuning.early_stopping" and "all 3 trials run at once" in message
    assert found("warning", {"early_stopping": "decay_curve"}) == []


def test_rule_parameters_not_in_trainer_args() -> None:
    [(path, message, hint)] = found("warning", trainer={"args": ["--lr=0.1", "--epochs=2"]})
    assert path == "trainer.args" and "already passes --lr" in message and "remove --lr" in hint


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"type": "double", "min": 1}, "needs both `min` and `max`"),
        ({"type": "double", "min": 0, "max": 1, "values": [1]}, "not `values`"),
        ({"type": "integer", "min": 0.5, "max": 3}, "whole numbers"),
        ({"type": "categorical", "values": []}, "non-empty `values`"),
        ({"type": "categorical", "values": ["a"], "scale": "log"}, "no `scale`"),
        ({"type": "discrete", "values": ["a"]}, "values are numbers"),
        ({"type": "discrete", "min": 1, "values": [1]}, "not `min`/`max`"),
    ],
)
def test_parameter_fields_of_its_type(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        template(params(p=spec))


def test_goals_take_the_sdks_upper_case_and_numbers_become_categories() -> None:
    t = template(
        {"metric_spec": {"loss": "MINIMIZE"}, **params(o={"type": "categorical", "values": [1, "b"]})}
    )
    assert t.tuning is not None
    assert t.tuning.metric_spec == {"loss": "minimize"}
    assert t.tuning.parameter_spec["o"].values == ["1", "b"]


def test_validate_places_each_tuning_problem_on_its_line(write_template: WriteTemplate) -> None:
    text = (
        "display_name: tune\nproject: vertexdist-demo\nstaging_bucket: gs://vertexdist-demo/s\n"
        "machine_type: n1-standard-4\n"
        "tuning:\n"
        "  metric_spec: {acc: maximize}\n"
        "  parameter_spec:\n"
        "    lr: {type: double, min: 0.0, max: 0.3, scale: log}\n"
        "    units: {type: integr, min: 1, max: 4}\n"
        "  max_trial_count: 4\n"
        "  parallel_trial_count: 2\n"
        "  serch_algorithm: grid\n"
    )
    _, problems = inspect_file(write_template(text=text))
    shown = {(p.line, p.path, p.message, p.hint) for p in problems}
    assert (
        9,
        "tuning.parameter_spec.units.type",
        "'integr' is not one of double, integer, categorical, discrete",
        "did you mean `integer`?",
    ) in shown
    assert any(
        p.line == 12 and p.path == "tuning.serch_algorithm" and "search_algorithm" in (p.hint or "")
        for p in problems
    )
    fixed = text.replace("integr", "integer").replace("serch_algorithm", "search_algorithm")
    _, problems = inspect_file(write_template(text=fixed))
    [log_scale] = [p for p in problems if p.path == "tuning.parameter_spec.lr.min"]
    assert (log_scale.line, log_scale.col) == (8, 29) and "needs min > 0" in log_scale.message
