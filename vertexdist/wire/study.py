"""The HyperparameterTuningJob wire shapes: the job and its StudySpec read into types (its trials: `trials`).

Follows https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.hyperparameterTuningJobs
and .../v1/StudySpec. Bodies arrive in proto-JSON with camelCase or snake_case keys, int64 as strings or
numbers and enums as names or numbers (`$alt=json;enum-encoding=int`); `normalize_tuning_job` makes one
form of them (camelCase, numbers, enum names), `encode_tuning_enums` turns names back into numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from vertexdist.wire import shapes
from vertexdist.wire.enums import (
    GOAL_TYPES,
    JOB_STATES,
    MEASUREMENT_SELECTION_TYPES,
    SCALE_TYPES,
    STUDY_ALGORITHMS,
    TRIAL_STATES,
    enum_name,
    enum_number,
)
from vertexdist.wire.proto_json import _as_int, _camel_tree, encode_enums, normalize_job_spec

ParameterKind = Literal["double", "integer", "categorical", "discrete"]
Stopping = Literal["none", "median", "decay_curve", "convex"]
Value = float | str
_VALUE_SPECS: dict[str, ParameterKind] = {
    "doubleValueSpec": "double",
    "integerValueSpec": "integer",
    "categoricalValueSpec": "categorical",
    "discreteValueSpec": "discrete",
}
_PARENT_VALUES = ("parentDiscreteValues", "parentIntValues", "parentCategoricalValues")
_STOPPING_SPECS: dict[str, Stopping] = {
    "medianAutomatedStoppingSpec": "median",
    "decayCurveStoppingSpec": "decay_curve",
    "convexAutomatedStoppingSpec": "convex",
}


@dataclass(frozen=True)
class Conditional:
    """A child parameter that exists only while its parent takes one of `parent_values`."""

    parent_values: tuple[Value, ...]
    parameter: Parameter


@dataclass(frozen=True)
class Parameter:
    id: str
    kind: ParameterKind
    min: float | None = None
    max: float | None = None
    values: tuple[Value, ...] = ()
    scale: str = "SCALE_TYPE_UNSPECIFIED"
    conditionals: tuple[Conditional, ...] = ()


@dataclass(frozen=True)
class Metric:
    id: str
    goal: str  # MAXIMIZE | MINIMIZE

    @property
    def maximize(self) -> bool:
        return self.goal == "MAXIMIZE"


@dataclass(frozen=True)
class StudySpec:
    metrics: tuple[Metric, ...]
    parameters: tuple[Parameter, ...]
    algorithm: str = "ALGORITHM_UNSPECIFIED"  # Vertex's default: Bayesian optimisation (Vizier)
    measurement_selection: str = "BEST_MEASUREMENT"
    stopping: Stopping = "none"

    @property
    def objective(self) -> Metric:
        """The metric that steers search and stopping here (the first one; see docs/tuning.md)."""
        return self.metrics[0]


@dataclass(frozen=True)
class TuningJob:
    """A HyperparameterTuningJob as submitted: its study, its trial budget and the job every trial runs."""

    display_name: str
    study: StudySpec
    max_trial_count: int
    parallel_trial_count: int
    max_failed_trial_count: int = 0
    trial_job_spec: Mapping[str, Any] = field(default_factory=dict)


class TuningSpecError(ValueError):
    """A tuning job body that Vertex would refuse; the message names the field."""


def _number(value: Any, where: str) -> float:
    try:
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    except (TypeError, ValueError):
        raise TuningSpecError(f"{where}: expected a number, got {value!r}") from None


def _parameter(raw: Any, where: str) -> Parameter:
    if not isinstance(raw, Mapping):
        raise TuningSpecError(f"{where}: expected an object")
    ident = raw.get("parameterId")
    if not isinstance(ident, str) or not ident:
        raise TuningSpecError(f"{where}.parameterId is required")
    specs = [key for key in _VALUE_SPECS if raw.get(key) is not None]
    if len(specs) != 1:
        raise TuningSpecError(
            f"{where} ({ident}): exactly one of doubleValueSpec, integerValueSpec, categoricalValueSpec"
            " and discreteValueSpec is required"
        )
    kind, body = _VALUE_SPECS[specs[0]], raw[specs[0]] or {}
    scale = enum_name(SCALE_TYPES, raw.get("scaleType", 0), f"{where}.scaleType")
    common: dict[str, Any] = {"id": ident, "kind": kind, "scale": scale}
    if kind in ("double", "integer"):
        low = _number(body.get("minValue", 0), f"{where}.{specs[0]}.minValue")
        high = _number(body.get("maxValue", 0), f"{where}.{specs[0]}.maxValue")
        if not low < high:
            raise TuningSpecError(f"{where} ({ident}): minValue {low:g} must be below maxValue {high:g}")
        common.update(min=low, max=high)
    else:
        values = body.get("values") or []
        if not values:
            raise TuningSpecError(f"{where}.{specs[0]}.values must not be empty")
        parsed: tuple[Value, ...] = (
            tuple(str(v) for v in values)
            if kind == "categorical"
            else tuple(_number(v, f"{where}.{specs[0]}.values") for v in values)
        )
        common["values"] = parsed
    if scale in ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE"):
        lowest = common.get("min") if kind != "discrete" else min(float(v) for v in common["values"])
        if lowest is not None and lowest <= 0:
            raise TuningSpecError(f"{where} ({ident}): a log scale needs values above 0")
    conditionals = []
    for index, child in enumerate(raw.get("conditionalParameterSpecs") or []):
        child_where = f"{where}.conditionalParameterSpecs[{index}]"
        parents = next(
            (child[k] for k in _PARENT_VALUES if isinstance(child, Mapping) and child.get(k)), None
        )
        if parents is None:
            raise TuningSpecError(f"{child_where}: needs the parent values it applies to")
        parent_values = tuple(
            str(v) if kind == "categorical" else _number(v, child_where) for v in parents.get("values") or []
        )
        conditionals.append(Conditional(parent_values, _parameter(child.get("parameterSpec"), child_where)))
    return Parameter(conditionals=tuple(conditionals), **common)


def normalize_tuning_job(body: Mapping[str, Any]) -> dict[str, Any]:
    """The body in one form: camelCase keys, numbers for int fields, enum names, a normalized trialJobSpec."""
    out: dict[str, Any] = _camel_tree(dict(body))
    wrong = shapes.problems(out, shapes.TUNING_JOB)
    if wrong:  # before any step trusts a type: a studySpec of the wrong types is a 400, not a TypeError
        raise TuningSpecError("; ".join(wrong[:5]))
    for key in ("maxTrialCount", "parallelTrialCount", "maxFailedTrialCount"):
        if key in out:
            out[key] = _as_int(out[key], key)
    study = out.get("studySpec")
    if isinstance(study, dict):
        for metric in study.get("metrics") or []:
            if isinstance(metric, dict) and "goal" in metric:
                metric["goal"] = enum_name(GOAL_TYPES, metric["goal"], "studySpec.metrics.goal")
        for key, table in (
            ("algorithm", STUDY_ALGORITHMS),
            ("measurementSelectionType", MEASUREMENT_SELECTION_TYPES),
        ):
            if key in study:
                study[key] = enum_name(table, study[key], f"studySpec.{key}")
        _normalize_parameters(study.get("parameters") or [])
    if isinstance(out.get("trialJobSpec"), dict):
        out["trialJobSpec"] = normalize_job_spec(out["trialJobSpec"])
    return out


def _normalize_parameters(parameters: Sequence[Any]) -> None:
    for parameter in parameters:
        if not isinstance(parameter, dict):
            continue
        if "scaleType" in parameter:
            parameter["scaleType"] = enum_name(SCALE_TYPES, parameter["scaleType"], "scaleType")
        spec = parameter.get("integerValueSpec")
        if isinstance(spec, dict):
            for key in ("minValue", "maxValue", "defaultValue"):
                if key in spec:
                    spec[key] = _as_int(spec[key], f"integerValueSpec.{key}")
        for child in parameter.get("conditionalParameterSpecs") or []:
            if isinstance(child, dict):
                ints = child.get("parentIntValues")
                if isinstance(ints, dict):
                    ints["values"] = [_as_int(v, "parentIntValues.values") for v in ints.get("values") or []]
                _normalize_parameters([child.get("parameterSpec")])


def parse_study_spec(raw: Any) -> StudySpec:
    """The typed StudySpec of a normalized body's `studySpec`; TuningSpecError names what is wrong."""
    if not isinstance(raw, Mapping):
        raise TuningSpecError("studySpec is required")
    metrics = []
    for index, metric in enumerate(raw.get("metrics") or []):
        ident = metric.get("metricId") if isinstance(metric, Mapping) else None
        goal = metric.get("goal") if isinstance(metric, Mapping) else None
        if not ident:
            raise TuningSpecError(f"studySpec.metrics[{index}].metricId is required")
        if goal not in ("MAXIMIZE", "MINIMIZE"):
            raise TuningSpecError(f"studySpec.metrics[{index}].goal must be MAXIMIZE or MINIMIZE")
        metrics.append(Metric(str(ident), str(goal)))
    if not metrics:
        raise TuningSpecError("studySpec.metrics must name at least one metric")
    parameters = tuple(
        _parameter(p, f"studySpec.parameters[{i}]") for i, p in enumerate(raw.get("parameters") or [])
    )
    if not parameters:
        raise TuningSpecError("studySpec.parameters must name at least one parameter")
    ids = [p.id for p in parameters]
    if len(set(ids)) != len(ids):
        raise TuningSpecError(f"studySpec.parameters: parameter ids repeat: {ids}")
    stopping: Stopping = next((kind for key, kind in _STOPPING_SPECS.items() if key in raw), "none")
    selection = raw.get("measurementSelectionType") or "BEST_MEASUREMENT"
    if selection == "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED":
        selection = "BEST_MEASUREMENT"  # Vertex's default
    algorithm = str(raw.get("algorithm") or "ALGORITHM_UNSPECIFIED")
    if algorithm == "GRID_SEARCH":
        bad = [p.id for p in _all_parameters(parameters) if p.kind == "double"]
        if bad:
            raise TuningSpecError(
                f"studySpec.algorithm GRID_SEARCH takes only integer, discrete and categorical parameters;"
                f" {bad[0]} is a double"
            )
    return StudySpec(
        metrics=tuple(metrics),
        parameters=parameters,
        algorithm=algorithm,
        measurement_selection=str(selection),
        stopping=stopping,
    )


def _all_parameters(parameters: Sequence[Parameter]) -> list[Parameter]:
    found = []
    for parameter in parameters:
        found.append(parameter)
        found += _all_parameters([c.parameter for c in parameter.conditionals])
    return found


def parse_tuning_job(body: Mapping[str, Any]) -> TuningJob:
    """The typed job from a normalized HyperparameterTuningJob body; TuningSpecError names the field."""
    counts = {}
    for key in ("maxTrialCount", "parallelTrialCount"):
        value = body.get(key)
        if not isinstance(value, int) or value < 1:
            raise TuningSpecError(f"{key} must be a positive number, got {value!r}")
        counts[key] = value
    failed = body.get("maxFailedTrialCount") or 0
    if not isinstance(failed, int) or failed < 0:
        raise TuningSpecError(f"maxFailedTrialCount must be 0 or more, got {failed!r}")
    spec = body.get("trialJobSpec")
    if not isinstance(spec, Mapping) or not spec.get("workerPoolSpecs"):
        raise TuningSpecError("trialJobSpec.workerPoolSpecs is required")
    return TuningJob(
        display_name=str(body.get("displayName") or ""),
        study=parse_study_spec(body.get("studySpec")),
        max_trial_count=counts["maxTrialCount"],
        parallel_trial_count=counts["parallelTrialCount"],
        max_failed_trial_count=failed,
        trial_job_spec=spec,
    )


def encode_tuning_enums(resource: dict[str, Any], *, as_int: bool) -> dict[str, Any]:
    """A copy of a stored tuning job (enum names) with every enum a number when the client asked for that."""
    if not as_int:
        return resource
    out = dict(resource)
    if isinstance(out.get("state"), str):
        out["state"] = enum_number(JOB_STATES, out["state"])
    if isinstance(out.get("trialJobSpec"), dict):
        out["trialJobSpec"] = encode_enums({"jobSpec": out["trialJobSpec"]}, as_int=True)["jobSpec"]
    study = out.get("studySpec")
    if isinstance(study, dict):
        study = dict(study)
        study["metrics"] = [
            {**m, "goal": enum_number(GOAL_TYPES, m["goal"])} if isinstance(m.get("goal"), str) else m
            for m in study.get("metrics") or []
        ]
        for key, table in (
            ("algorithm", STUDY_ALGORITHMS),
            ("measurementSelectionType", MEASUREMENT_SELECTION_TYPES),
        ):
            if isinstance(study.get(key), str):
                study[key] = enum_number(table, study[key])
        study["parameters"] = [_encode_parameter(p) for p in study.get("parameters") or []]
        out["studySpec"] = study
    out["trials"] = [
        {**t, "state": enum_number(TRIAL_STATES, t["state"])} if isinstance(t.get("state"), str) else t
        for t in out.get("trials") or []
    ]
    return out


def _encode_parameter(parameter: dict[str, Any]) -> dict[str, Any]:
    out = dict(parameter)
    if isinstance(out.get("scaleType"), str):
        out["scaleType"] = enum_number(SCALE_TYPES, out["scaleType"])
    if out.get("conditionalParameterSpecs"):
        out["conditionalParameterSpecs"] = [
            {**c, "parameterSpec": _encode_parameter(c["parameterSpec"])} if c.get("parameterSpec") else c
            for c in out["conditionalParameterSpecs"]
        ]
    return out
