"""A tuning job's trials on the wire: Vertex's `Trial` and `Measurement` shapes, written and read, and which
trial is best (https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.studies.trials).

Written as the emulator serves them and `local-run` keeps them; read from either, or from Vertex through
`MessageToDict` (camelCase, int64 as text). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vertexdist.wire.enums import TRIAL_STATES, enum_name
from vertexdist.wire.study import Metric, Value


@dataclass(frozen=True)
class Measurement:
    """One report of a trial: its metric values at a step (cloudml-hypertune's `global_step`)."""

    step: int
    values: Mapping[str, float]
    elapsed_s: float | None = None


@dataclass(frozen=True)
class Trial:
    id: str
    state: str  # a TRIAL_STATES name
    parameters: tuple[tuple[str, Value], ...] = ()
    final_measurement: Measurement | None = None
    measurements: tuple[Measurement, ...] = ()
    start_time: str | None = None
    end_time: str | None = None
    infeasible_reason: str | None = None
    custom_job: str | None = None

    @property
    def parameter_values(self) -> dict[str, Value]:
        return dict(self.parameters)


def _duration(seconds: float) -> str:
    return f"{seconds:.3f}s"


def measurement_to_json(m: Measurement) -> dict[str, Any]:
    out: dict[str, Any] = {
        "stepCount": m.step,
        "metrics": [{"metricId": k, "value": v} for k, v in m.values.items()],
    }
    if m.elapsed_s is not None:
        out["elapsedDuration"] = _duration(m.elapsed_s)
    return out


def measurement_from_json(raw: Mapping[str, Any]) -> Measurement:
    elapsed = raw.get("elapsedDuration")
    return Measurement(
        step=int(float(raw.get("stepCount") or raw.get("step_count") or 0)),
        values={
            str(m.get("metricId") or m.get("metric_id")): float(m.get("value") or 0.0)
            for m in raw.get("metrics") or []
        },
        elapsed_s=float(str(elapsed).rstrip("s")) if elapsed else None,
    )


def trial_to_json(trial: Trial) -> dict[str, Any]:
    """A Trial in Vertex's shape (`HyperparameterTuningJob.trials[]`), fields present only when set."""
    out: dict[str, Any] = {
        "id": trial.id,
        "state": trial.state,
        "parameters": [{"parameterId": k, "value": v} for k, v in trial.parameters],
    }
    if trial.final_measurement is not None:
        out["finalMeasurement"] = measurement_to_json(trial.final_measurement)
    if trial.measurements:
        out["measurements"] = [measurement_to_json(m) for m in trial.measurements]
    for key, value in (
        ("startTime", trial.start_time),
        ("endTime", trial.end_time),
        ("infeasibleReason", trial.infeasible_reason),
        ("customJob", trial.custom_job),
    ):
        if value:
            out[key] = value
    return out


def trial_from_json(raw: Mapping[str, Any]) -> Trial:
    """A Trial from Vertex's JSON (camelCase, as the REST API or `MessageToDict` gives it)."""
    final = raw.get("finalMeasurement")
    state = raw.get("state", "STATE_UNSPECIFIED")
    return Trial(
        id=str(raw.get("id", "")),
        state=enum_name(TRIAL_STATES, state, "trial.state"),
        parameters=tuple((str(p.get("parameterId")), p.get("value")) for p in raw.get("parameters") or []),
        final_measurement=measurement_from_json(final) if isinstance(final, Mapping) else None,
        measurements=tuple(measurement_from_json(m) for m in raw.get("measurements") or []),
        start_time=raw.get("startTime"),
        end_time=raw.get("endTime"),
        infeasible_reason=raw.get("infeasibleReason"),
        custom_job=raw.get("customJob"),
    )


def final_value(trial: Trial, metric: Metric) -> float | None:
    """The trial's final value of `metric`, or None (not succeeded, or it never reported that metric)."""
    if trial.state != "SUCCEEDED" or trial.final_measurement is None:
        return None
    return trial.final_measurement.values.get(metric.id)


def best_trial(trials: Sequence[Trial], metric: Metric) -> Trial | None:
    """The succeeded trial with the best final value of `metric` (the first of equals)."""
    best: Trial | None = None
    best_value: float | None = None
    for trial in trials:
        value = final_value(trial, metric)
        if value is None:
            continue
        if best_value is None or (value > best_value if metric.maximize else value < best_value):
            best, best_value = trial, value
    return best
