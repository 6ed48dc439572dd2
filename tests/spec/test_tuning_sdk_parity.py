"""The CreateHyperparameterTuningJob body equals what google-cloud-aiplatform's own `HyperparameterTuningJob`
builds from the same arguments, and parses into the API's request with unknown fields rejected.

The SDK's constructor takes no early-stopping spec and sets scheduling only in `run()`; those two parts are
compared on their own (the stopping spec parses into StudySpec's oneof; scheduling is the CustomJobSpec's).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vertexdist.render import render_job_spec, render_request
from vertexdist.spec import JobTemplate, load_template

from .conftest import BASE, REPO_ROOT

aiplatform = pytest.importorskip("google.cloud.aiplatform")
aiplatform_v1 = pytest.importorskip("google.cloud.aiplatform_v1")
hpt = pytest.importorskip("google.cloud.aiplatform.hyperparameter_tuning")

PACKAGE_URI = "gs://vertexdist-demo/staging/vertexdist/packages/ab/trainer_pkg-0.1.tar.gz"
CPU = {"machine_type": "n1-standard-4", "accelerator_type": None, "accelerator_count": 0, "replica_count": 1}
SHIPPED_TUNING = [
    p for p in sorted((REPO_ROOT / "job_templates").glob("*.yaml")) if "tuning:" in p.read_text()
]
VARIANTS: dict[str, dict[str, Any]] = {
    "bayesian-all-types": {
        "metric_spec": {"loss": "minimize"},
        "parameter_spec": {
            "lr": {"type": "double", "min": 1e-5, "max": 0.1, "scale": "log"},
            "units": {"type": "integer", "min": 4, "max": 128, "scale": "reverse_log"},
            "act": {"type": "categorical", "values": ["relu", "selu"]},
            "batch": {"type": "discrete", "values": [16, 32.5, 64]},
        },
        "max_trial_count": 12,
        "parallel_trial_count": 3,
    },
    "grid-last": {
        "metric_spec": {"acc": "maximize"},
        "parameter_spec": {"units": {"type": "integer", "min": 1, "max": 3}},
        "max_trial_count": 3,
        "parallel_trial_count": 1,
        "search_algorithm": "grid",
        "measurement_selection": "last",
        "max_failed_trial_count": 2,
    },
    "random-two-metrics": {
        "metric_spec": {"acc": "maximize", "latency": "minimize"},
        "parameter_spec": {"x": {"type": "double", "min": -1, "max": 1}},
        "max_trial_count": 5,
        "parallel_trial_count": 5,
        "search_algorithm": "random",
    },
}


def sdk_parameter(spec: Any) -> Any:
    if spec.type == "double":
        return hpt.DoubleParameterSpec(min=spec.min, max=spec.max, scale=spec.effective_scale)
    if spec.type == "integer":
        return hpt.IntegerParameterSpec(min=int(spec.min), max=int(spec.max), scale=spec.effective_scale)
    if spec.type == "categorical":
        return hpt.CategoricalParameterSpec(values=spec.values)
    return hpt.DiscreteParameterSpec(values=spec.values, scale=spec.effective_scale)


def sdk_job(t: JobTemplate, labels: dict[str, str]) -> Any:
    """What the SDK builds from the template's arguments (its trial job: the template's own CustomJobSpec)."""
    from google.auth.credentials import AnonymousCredentials

    assert t.tuning is not None
    spec = render_job_spec(t, package_uri=PACKAGE_URI)
    common = {"project": t.project, "location": t.location, "credentials": AnonymousCredentials()}
    custom_job = aiplatform.CustomJob(
        display_name=t.display_name,
        worker_pool_specs=list(aiplatform_v1.CustomJobSpec.from_json(json.dumps(spec)).worker_pool_specs),
        base_output_dir=spec["baseOutputDirectory"]["outputUriPrefix"],
        staging_bucket=t.staging_bucket,
        **common,
    )
    tuning = t.tuning
    return aiplatform.HyperparameterTuningJob(
        display_name=t.display_name,
        custom_job=custom_job,
        metric_spec=dict(tuning.metric_spec),
        parameter_spec={name: sdk_parameter(p) for name, p in tuning.parameter_spec.items()},
        max_trial_count=tuning.max_trial_count,
        parallel_trial_count=tuning.parallel_trial_count,
        max_failed_trial_count=tuning.max_failed_trial_count,
        search_algorithm=None if tuning.search_algorithm == "bayesian" else tuning.search_algorithm,
        measurement_selection=tuning.measurement_selection,
        labels=labels,
        **common,
    )._gca_resource


def as_dict(message: Any) -> dict[str, Any]:
    from google.protobuf import json_format

    return dict(json_format.MessageToDict(type(message).pb(message)))


def ours_and_sdks(t: JobTemplate) -> tuple[dict[str, Any], Any]:
    body = render_request(t, package_uri=PACKAGE_URI)["hyperparameterTuningJob"]
    comparable = {
        **body,
        "trialJobSpec": {k: v for k, v in body["trialJobSpec"].items() if k != "scheduling"},
    }
    study = comparable["studySpec"] = dict(body["studySpec"])
    study.pop("medianAutomatedStoppingSpec", None)
    study.pop("decayCurveStoppingSpec", None)
    return comparable, sdk_job(t, body["labels"])


def _template(name: str) -> JobTemplate:
    return JobTemplate.model_validate({**BASE, **CPU, "display_name": name, "tuning": VARIANTS[name]})


@pytest.mark.parametrize("name", list(VARIANTS))
def test_tuning_body_equals_the_sdks_hyperparameter_tuning_job(name: str) -> None:
    ours, sdk = ours_and_sdks(_template(name))
    parsed = aiplatform_v1.HyperparameterTuningJob.from_json(json.dumps(ours), ignore_unknown_fields=False)
    assert parsed == sdk
    # Field for field too, int64 numbers aside (proto-JSON writes them as strings); the trial job's pools
    # carry `env: []` where the SDK omits empty lists (tests/spec/test_sdk_parity.py checks the pools).
    mine = {k: v for k, v in ours.items() if k != "trialJobSpec"}
    theirs = {k: v for k, v in as_dict(sdk).items() if k != "trialJobSpec"}
    assert json.loads(json.dumps(mine), parse_int=str) == json.loads(json.dumps(theirs), parse_int=str)


@pytest.mark.parametrize("path", SHIPPED_TUNING, ids=lambda p: p.name)
def test_shipped_tuning_template_equals_the_sdk(path: Path) -> None:
    ours, sdk = ours_and_sdks(load_template(path))
    assert (
        aiplatform_v1.HyperparameterTuningJob.from_json(json.dumps(ours), ignore_unknown_fields=False) == sdk
    )


def test_there_is_a_shipped_tuning_template() -> None:
    assert [p.name for p in SHIPPED_TUNING] == ["cpu-tune.yaml"]


@pytest.mark.parametrize(
    ("stopping", "field"),
    [("median", "median_automated_stopping_spec"), ("decay_curve", "decay_curve_stopping_spec")],
)
def test_request_parses_with_its_stopping_spec_and_scheduling(stopping: str, field: str) -> None:
    t = JobTemplate.model_validate(
        {**BASE, **CPU, "timeout": "2h", "tuning": {**VARIANTS["grid-last"], "early_stopping": stopping}}
    )
    request = render_request(t, package_uri=PACKAGE_URI)
    parsed = aiplatform_v1.CreateHyperparameterTuningJobRequest.from_json(
        json.dumps(request), ignore_unknown_fields=False
    )
    assert parsed.parent == request["parent"]
    assert (
        aiplatform_v1.StudySpec.pb(parsed.hyperparameter_tuning_job.study_spec).WhichOneof(
            "automated_stopping_spec"
        )
        == field
    )
    assert parsed.hyperparameter_tuning_job.trial_job_spec.scheduling.timeout.total_seconds() == 7200
