"""The tuning job's wire shapes: bodies as the SDK's REST transport sends them (int enums, int64 as text)
read the same as named ones, trials go out in Vertex's shape and come back unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from vertexdist.wire.study import TuningSpecError, encode_tuning_enums, normalize_tuning_job, parse_tuning_job
from vertexdist.wire.trials import Measurement, Trial, best_trial, trial_from_json, trial_to_json

POOL = {
    "machineSpec": {"machineType": "n1-standard-4"},
    "replicaCount": "1",
    "containerSpec": {"imageUri": "x", "command": ["python"]},
}


def body(**study: Any) -> dict[str, Any]:
    return {
        "displayName": "hpt",
        "studySpec": {
            "metrics": [{"metricId": "loss", "goal": 2}],
            "parameters": [
                {
                    "parameterId": "units",
                    "integerValueSpec": {"minValue": "4", "maxValue": "8"},
                    "scaleType": 1,
                },
                {
                    "parameterId": "opt",
                    "categoricalValueSpec": {"values": ["a", "b"]},
                    "conditionalParameterSpecs": [
                        {
                            "parentCategoricalValues": {"values": ["a"]},
                            "parameterSpec": {
                                "parameterId": "lr",
                                "doubleValueSpec": {"minValue": 0.1, "maxValue": 1},
                            },
                        }
                    ],
                },
            ],
            **study,
        },
        "maxTrialCount": 4,
        "parallelTrialCount": "2",
        "trialJobSpec": {"workerPoolSpecs": [POOL]},
    }


def test_int_enums_and_int64_strings_read_as_names_and_numbers() -> None:
    normalized = normalize_tuning_job(body(algorithm=3, measurementSelectionType=1))
    job = parse_tuning_job(normalized)
    assert job.parallel_trial_count == 2 and job.max_failed_trial_count == 0
    study = job.study
    assert study.objective.id == "loss" and not study.objective.maximize
    assert study.algorithm == "RANDOM_SEARCH" and study.measurement_selection == "LAST_MEASUREMENT"
    units, opt = study.parameters
    assert (units.kind, units.min, units.max, units.scale) == ("integer", 4.0, 8.0, "UNIT_LINEAR_SCALE")
    [child] = opt.conditionals
    assert child.parent_values == ("a",) and child.parameter.id == "lr"
    assert normalized["trialJobSpec"]["workerPoolSpecs"][0]["replicaCount"] == 1


def test_defaults_are_vertexs() -> None:
    study = parse_tuning_job(normalize_tuning_job(body())).study
    assert study.algorithm == "ALGORITHM_UNSPECIFIED"  # Bayesian optimisation
    assert study.measurement_selection == "BEST_MEASUREMENT" and study.stopping == "none"
    assert (
        parse_tuning_job(normalize_tuning_job(body(medianAutomatedStoppingSpec={}))).study.stopping
        == "median"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"metrics": []}, "at least one metric"),
        (
            {"parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": 2, "maxValue": 1}}]},
            "below maxValue",
        ),
        ({"parameters": [{"parameterId": "x"}]}, "exactly one of"),
        (
            {
                "algorithm": "GRID_SEARCH",
                "parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}],
            },
            "x is a double",
        ),
        (
            {
                "parameters": [
                    {
                        "parameterId": "x",
                        "doubleValueSpec": {"minValue": 0, "maxValue": 1},
                        "scaleType": "UNIT_LOG_SCALE",
                    }
                ]
            },
            "log scale needs values above 0",
        ),
    ],
)
def test_bodies_vertex_refuses_name_the_field(change: dict[str, Any], message: str) -> None:
    raw = body()
    raw["studySpec"].update(change)
    with pytest.raises(TuningSpecError, match=message):
        parse_tuning_job(normalize_tuning_job(raw))


def test_a_trial_round_trips_and_enums_encode_as_numbers() -> None:
    trial = Trial(
        id="2",
        state="SUCCEEDED",
        parameters=(("units", 5), ("opt", "a")),
        final_measurement=Measurement(3, {"loss": 0.5}, 1.25),
        measurements=(Measurement(1, {"loss": 0.9}, 0.5), Measurement(3, {"loss": 0.5}, 1.25)),
        start_time="2026-01-01T00:00:00Z",
        custom_job="projects/p/locations/l/customJobs/1",
    )
    raw = trial_to_json(trial)
    assert raw["finalMeasurement"] == {
        "stepCount": 3,
        "metrics": [{"metricId": "loss", "value": 0.5}],
        "elapsedDuration": "1.250s",
    }
    assert trial_from_json(raw) == trial
    stored = {**normalize_tuning_job(body()), "state": "JOB_STATE_RUNNING", "trials": [raw]}
    encoded = encode_tuning_enums(stored, as_int=True)
    assert encoded["state"] == 3 and encoded["trials"][0]["state"] == 4
    assert encoded["studySpec"]["metrics"][0]["goal"] == 2
    assert encoded["studySpec"]["parameters"][0]["scaleType"] == 1
    assert encode_tuning_enums(stored, as_int=False) is stored


def test_the_best_trial_follows_the_goal() -> None:
    study = parse_tuning_job(normalize_tuning_job(body())).study
    trials = [
        Trial(str(i), "SUCCEEDED", final_measurement=Measurement(1, {"loss": v}))
        for i, v in enumerate([3, 1, 2])
    ]
    trials.append(Trial("9", "INFEASIBLE"))
    best = best_trial(trials, study.objective)
    assert best is not None and best.id == "1"
