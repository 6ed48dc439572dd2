"""The `tuning:` section of a template: a Vertex HyperparameterTuningJob whose trials are the template's job.

Names mirror the SDK's `HyperparameterTuningJob(...)` constructor and `hyperparameter_tuning.*ParameterSpec`
(https://cloud.google.com/vertex-ai/docs/reference/rest/v1/StudySpec). Per-field checks live here; checks
across fields (ranges, scales, grid size) live in `tuning_rules`, so `validate` places each on its line.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, field_validator, model_validator

ParameterType = Literal["double", "integer", "categorical", "discrete"]
Scale = Literal["linear", "log", "reverse_log"]
Goal = Literal["maximize", "minimize"]
SearchAlgorithm = Literal["bayesian", "grid", "random"]
MeasurementSelection = Literal["best", "last"]
EarlyStopping = Literal["none", "median", "decay_curve"]

Values = Annotated[
    list[Any] | None,
    WithJsonSchema(
        {
            "type": "array",
            "items": {"type": ["string", "number"]},
            "description": "categorical: the categories (text); discrete: the numbers, in increasing order.",
        }
    ),
]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", str_strip_whitespace=True)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class ParameterSpec(_Strict):
    """One parameter to tune; each trial gets it as `--NAME=VALUE` after the trainer's own args."""

    # What `validate` puts in place of a broken parameter so the rest can be checked (spec/partial.py).
    PLACEHOLDER: ClassVar[dict[str, Any]] = {"type": "categorical", "values": ["placeholder"]}

    type: ParameterType = Field(description="double | integer (min, max) or categorical | discrete (values).")
    min: float | None = Field(default=None, description="double/integer: the smallest value (inclusive).")
    max: float | None = Field(default=None, description="double/integer: the largest value (inclusive).")
    scale: Scale | None = Field(
        default=None,
        description="double/integer/discrete: linear (default), log or reverse_log. Not for categorical.",
    )
    values: Values = Field(default=None)

    @field_validator("min", "max", mode="before")
    @classmethod
    def _no_booleans(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got {value!r}")
        return value

    @model_validator(mode="after")
    def _fields_of_its_type(self) -> ParameterSpec:
        kind = self.type
        if kind in ("double", "integer"):
            if self.min is None or self.max is None:
                raise ValueError(f"a {kind} parameter needs both `min` and `max`")
            if self.values is not None:
                raise ValueError(f"a {kind} parameter takes `min` and `max`, not `values`")
            if kind == "integer" and not (self.min.is_integer() and self.max.is_integer()):
                raise ValueError(
                    f"an integer parameter's min and max are whole numbers, got {self.min:g} and {self.max:g}"
                )
            return self
        if self.min is not None or self.max is not None:
            raise ValueError(f"a {kind} parameter takes `values`, not `min`/`max`")
        if not self.values:
            raise ValueError(f"a {kind} parameter needs a non-empty `values` list")
        if kind == "categorical":
            if self.scale is not None:
                raise ValueError("a categorical parameter has no `scale`; remove it")
            bad = [v for v in self.values if not (isinstance(v, str) or _is_number(v))]
            if bad:
                raise ValueError(f"categories are text, got {bad[0]!r}")
            object.__setattr__(self, "values", [v if isinstance(v, str) else f"{v:g}" for v in self.values])
            return self
        bad = [v for v in self.values if not _is_number(v)]
        if bad:
            raise ValueError(f"a discrete parameter's values are numbers, got {bad[0]!r}")
        object.__setattr__(self, "values", [float(v) for v in self.values])
        return self

    @property
    def effective_scale(self) -> Scale | None:
        """The scale Vertex gets: linear unless set; none for a categorical parameter (as in the SDK)."""
        if self.type == "categorical":
            return None
        return self.scale or "linear"


class TuningSpec(_Strict):
    """A hyperparameter tuning job: Vertex runs the template's job once per trial, with the trial's values."""

    metric_spec: dict[str, Goal] = Field(
        description="Metric tag the trainer reports (cloudml-hypertune) -> maximize | minimize."
    )
    parameter_spec: dict[str, ParameterSpec] = Field(description="Parameter name -> what values it takes.")
    max_trial_count: int = Field(ge=1, description="How many trials in all.")
    parallel_trial_count: int = Field(ge=1, description="How many trials run at once.")
    max_failed_trial_count: int = Field(
        default=0, ge=0, description="Failed trials that fail the job; 0 leaves it to Vertex's own rule."
    )
    search_algorithm: SearchAlgorithm = Field(
        default="bayesian", description="bayesian (Vertex's default, Vizier), grid or random."
    )
    measurement_selection: MeasurementSelection = Field(
        default="best", description="Which reported measurement is a trial's final one: best or last."
    )
    early_stopping: EarlyStopping = Field(
        default="none", description="Stop unpromising trials early: none, median or decay_curve."
    )

    @field_validator("metric_spec", mode="before")
    @classmethod
    def _goal_words(cls, value: Any) -> Any:
        # The SDK takes 'MAXIMIZE' as well as 'maximize' (it upper-cases the goal).
        if isinstance(value, dict):
            return {k: v.lower() if isinstance(v, str) else v for k, v in value.items()}
        return value

    @field_validator("metric_spec")
    @classmethod
    def _one_metric_at_least(cls, value: dict[str, Goal]) -> dict[str, Goal]:
        if not value:
            raise ValueError("name the metric to optimise, e.g. {val_accuracy: maximize}")
        return value

    @field_validator("parameter_spec")
    @classmethod
    def _one_parameter_at_least(cls, value: dict[str, ParameterSpec]) -> dict[str, ParameterSpec]:
        if not value:
            raise ValueError("name at least one parameter to tune")
        return value
