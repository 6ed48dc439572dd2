"""Template with a `tuning:` section -> the CreateHyperparameterTuningJob request. Pure functions.

The body is what google-cloud-aiplatform's `HyperparameterTuningJob(...)` builds from the same arguments
(tests/spec/test_tuning_sdk_parity.py holds them equal), in proto-JSON camelCase
(https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.hyperparameterTuningJobs):
the template's CustomJobSpec is the `trialJobSpec` every trial runs; `search_algorithm: bayesian` is Vertex's
default and so is sent as no algorithm at all, as the SDK does. Early stopping is a StudySpec stopping spec
(the SDK's constructor has no argument for it; the API takes it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vertexdist.render.custom_job import render_job_spec
from vertexdist.render.request_hash import REQUEST_HASH_LABEL, request_hash

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate
    from vertexdist.spec.tuning import ParameterSpec, TuningSpec

ALGORITHMS = {"grid": "GRID_SEARCH", "random": "RANDOM_SEARCH"}  # bayesian: ALGORITHM_UNSPECIFIED
MEASUREMENT_SELECTIONS = {"best": "BEST_MEASUREMENT", "last": "LAST_MEASUREMENT"}
SCALES = {"linear": "UNIT_LINEAR_SCALE", "log": "UNIT_LOG_SCALE", "reverse_log": "UNIT_REVERSE_LOG_SCALE"}
STOPPING_SPECS = {"median": "medianAutomatedStoppingSpec", "decay_curve": "decayCurveStoppingSpec"}


def render_parameter(name: str, p: ParameterSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"parameterId": name}
    if p.type == "double":
        out["doubleValueSpec"] = {"minValue": p.min, "maxValue": p.max}
    elif p.type == "integer":
        assert p.min is not None and p.max is not None
        out["integerValueSpec"] = {"minValue": int(p.min), "maxValue": int(p.max)}
    elif p.type == "categorical":
        out["categoricalValueSpec"] = {"values": list(p.values or [])}
    else:
        out["discreteValueSpec"] = {"values": [float(v) for v in p.values or []]}
    scale = p.effective_scale
    if scale is not None:
        out["scaleType"] = SCALES[scale]
    return out


def render_study_spec(tuning: TuningSpec) -> dict[str, Any]:
    """The StudySpec: metrics, parameters, algorithm, measurement selection, early stopping."""
    spec: dict[str, Any] = {
        "metrics": [{"metricId": tag, "goal": goal.upper()} for tag, goal in tuning.metric_spec.items()],
        "parameters": [render_parameter(name, p) for name, p in tuning.parameter_spec.items()],
    }
    if tuning.search_algorithm in ALGORITHMS:
        spec["algorithm"] = ALGORITHMS[tuning.search_algorithm]
    spec["measurementSelectionType"] = MEASUREMENT_SELECTIONS[tuning.measurement_selection]
    if tuning.early_stopping in STOPPING_SPECS:
        spec[STOPPING_SPECS[tuning.early_stopping]] = {}
    return spec


def render_tuning_job(
    t: JobTemplate,
    *,
    package_uri: str | None = None,
    image_uri: str | None = None,
    resume_from: str | None = None,
) -> dict[str, Any]:
    """The HyperparameterTuningJob resource (without its request-hash label); its trials' output base is
    the job's own folder (`<job-folder>` until submit fills it in) or, resuming, the earlier job's."""
    tuning = t.tuning
    assert tuning is not None, "render_tuning_job needs a template with a tuning section"
    job: dict[str, Any] = {
        "displayName": t.display_name,
        "studySpec": render_study_spec(tuning),
        "maxTrialCount": tuning.max_trial_count,
        "parallelTrialCount": tuning.parallel_trial_count,
    }
    if tuning.max_failed_trial_count:
        job["maxFailedTrialCount"] = tuning.max_failed_trial_count
    job["trialJobSpec"] = render_job_spec(
        t, package_uri=package_uri, image_uri=image_uri, resume_from=resume_from
    )
    job["labels"] = dict(t.labels)
    return job


def render_tuning_request(
    t: JobTemplate,
    *,
    package_uri: str | None = None,
    image_uri: str | None = None,
    resume_from: str | None = None,
) -> dict[str, Any]:
    """The exact body of JobService.CreateHyperparameterTuningJob, its `vertexdist-request` label included."""
    job = render_tuning_job(t, package_uri=package_uri, image_uri=image_uri, resume_from=resume_from)
    request: dict[str, Any] = {
        "parent": f"projects/{t.project}/locations/{t.location}",
        "hyperparameterTuningJob": job,
    }
    job["labels"][REQUEST_HASH_LABEL] = request_hash(request)
    return request
