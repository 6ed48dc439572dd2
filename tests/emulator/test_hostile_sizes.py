"""Hostile sizes and values get a 400 at once: replica counts past int32 or the local cap, tuning budgets out
of range, a studySpec of the wrong types, display names and labels outside Vertex's rules, NUL and `=` where a
process cannot take them (docs/commands/emulator.md, "Limits on what a request may ask")."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from vertexdist.emulator import Emulator
from vertexdist.emulator.vertex.validation import LOCAL_MAX_REPLICAS
from vertexdist.spec.names import display_name_problem, label_key_problem, label_value_problem
from vertexdist.wire import shapes
from vertexdist.wire.study import TuningSpecError, normalize_tuning_job, parse_tuning_job

API = "/v1/projects/test-proj/locations/us-central1"


def pool(replicas: Any = 1, **code: Any) -> dict[str, Any]:
    return {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": replicas,
        "containerSpec": {"imageUri": "example.com/standin:latest", "command": ["true"], **code},
    }


def tuning_body(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "displayName": "t",
        "maxTrialCount": 2,
        "parallelTrialCount": 1,
        "studySpec": {
            "metrics": [{"metricId": "loss", "goal": "MINIMIZE"}],
            "parameters": [{"parameterId": "lr", "doubleValueSpec": {"minValue": 0.1, "maxValue": 1}}],
        },
        "trialJobSpec": {"workerPoolSpecs": [pool()]},
    }
    body.update(fields)
    return body


def post(emu: Emulator, path: str, body: dict[str, Any]) -> tuple[int, str]:
    request = urllib.request.Request(
        emu.vertex_endpoint + API + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())["error"]["message"]


def rss_kib() -> int:
    for line in open("/proc/self/status").read().splitlines():  # noqa: SIM115
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_replica_counts_past_int32_and_int64_are_refused_by_their_shape() -> None:
    spec = {"workerPoolSpecs": [pool(), pool(2**31)]}
    assert shapes.problems(spec, shapes.CUSTOM_JOB_SPEC) == [
        "workerPoolSpecs[1].replicaCount: Invalid value (TYPE_INT32), 2147483648:"
        " out of range, at most 2147483647"
    ]
    assert shapes.problems({"workerPoolSpecs": [pool(2**31 - 1)]}, shapes.CUSTOM_JOB_SPEC) == []
    # 19 digits pass the decimal form but not int64: the SDK could not read such a job back (ParseError).
    wrong = shapes.problems({"x": "9999999999999999999"}, {"x": shapes.INT})
    assert wrong == [
        "x: Invalid value (TYPE_INT64), '9999999999999999999': out of range, at most 9223372036854775807"
    ]


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"studySpec": {"metrics": 5}}, "studySpec.metrics: expected a list, got 5"),
        (
            {"studySpec": {"metrics": [{"metricId": "m", "goal": "MINIMIZE"}], "parameters": "lr"}},
            "expected a list",
        ),
        ({"studySpec": [1]}, "studySpec: expected an object"),
        (
            {"studySpec": {"parameters": [{"parameterId": "a", "doubleValueSpec": "x"}]}},
            "studySpec.parameters[0].doubleValueSpec: expected an object",
        ),
        (
            {"studySpec": {"parameters": [{"parameterId": "a", "discreteValueSpec": {"values": 3}}]}},
            "discreteValueSpec.values: expected a list",
        ),
        ({"maxTrialCount": 2**31}, "maxTrialCount: Invalid value (TYPE_INT32)"),
        ({"parallelTrialCount": -(2**40)}, "parallelTrialCount: Invalid value (TYPE_INT32)"),
        ({"maxTrialCount": 0}, "maxTrialCount must be a positive number"),
        ({"parallelTrialCount": "many"}, "parallelTrialCount: expected an integer"),
    ],
)
def test_tuning_bodies_of_the_wrong_types_or_sizes_are_spec_errors(
    change: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(TuningSpecError) as caught:
        parse_tuning_job(normalize_tuning_job(tuning_body(**change)))
    assert fragment in str(caught.value)


def test_one_rule_for_labels_and_display_names() -> None:
    assert label_key_problem("team") is None
    assert label_key_problem("équipe_日本-2") is None  # international characters are allowed
    assert label_key_problem("Team") is not None
    assert label_key_problem("2team") is not None
    assert label_key_problem("a" * 64) is not None
    assert label_key_problem("a=b") is not None
    assert label_key_problem("a\x00") is not None
    assert label_value_problem("") is None
    assert label_value_problem("v" * 63) is None
    assert label_value_problem("v" * 64) is not None
    assert label_value_problem("A") is not None
    assert display_name_problem("x" * 128) is None
    assert display_name_problem("x" * 129) == "the display name is 129 characters long; at most 128"


def test_a_replica_count_of_a_trillion_is_refused_at_once_in_bounded_memory(emulator: Emulator) -> None:
    before, started = rss_kib(), time.monotonic()
    for body in (
        {"displayName": "x", "jobSpec": {"workerPoolSpecs": [pool(), pool(10**12)]}},
        {"displayName": "x", "jobSpec": {"workerPoolSpecs": [pool(), pool(str(10**12))]}},
        {"displayName": "x", "jobSpec": {"workerPoolSpecs": [pool(), pool(2**31 - 1)]}},
    ):
        status, message = post(emulator, "/customJobs", body)
        assert status == 400, message
        assert "workerPoolSpecs[1].replicaCount" in message or f"at most {LOCAL_MAX_REPLICAS}" in message
    assert time.monotonic() - started < 5
    time.sleep(0.3)  # a launch thread, had one started, would be sizing the job now
    assert rss_kib() - before < 50 * 1024
    names = {j["displayName"] for j in emulator.service.store.list(API[4:], "customJobs")}
    assert "x" not in names


@pytest.mark.parametrize(
    ("path", "body", "fragment"),
    [
        (
            "/customJobs",
            {"displayName": "x", "jobSpec": {"workerPoolSpecs": [pool(), pool(LOCAL_MAX_REPLICAS)]}},
            f"runs at most {LOCAL_MAX_REPLICAS} replicas",
        ),
        (
            "/customJobs",
            {"displayName": "x" * 129, "jobSpec": {"workerPoolSpecs": [pool()]}},
            "129 characters",
        ),
        (
            "/customJobs",
            {"displayName": "x", "labels": {"Team": "ml"}, "jobSpec": {"workerPoolSpecs": [pool()]}},
            "customJob.labels: label key 'Team' must start with a lowercase letter",
        ),
        (
            "/customJobs",
            {"displayName": "x", "labels": {"team": "a=b"}, "jobSpec": {"workerPoolSpecs": [pool()]}},
            "holds '='",
        ),
        (
            "/customJobs",
            {
                "displayName": "x",
                "labels": {f"k{i}": "v" for i in range(65)},
                "jobSpec": {"workerPoolSpecs": [pool()]},
            },
            "65 labels; at most 64",
        ),
        (
            "/customJobs",
            {"displayName": "x", "jobSpec": {"workerPoolSpecs": [pool(args=["a\x00b"])]}},
            "containerSpec.args[0] holds a NUL character",
        ),
        (
            "/customJobs",
            {"displayName": "x", "jobSpec": {"workerPoolSpecs": [pool(env=[{"name": "A=B", "value": "1"}])]}},
            "env[0].name 'A=B' is not an environment variable name",
        ),
        (
            "/hyperparameterTuningJobs",
            tuning_body(studySpec={"metrics": 5}),
            "studySpec.metrics: expected a list",
        ),
        ("/hyperparameterTuningJobs", tuning_body(maxTrialCount=2**40), "maxTrialCount: Invalid value"),
        (
            "/hyperparameterTuningJobs",
            tuning_body(maxTrialCount=100, parallelTrialCount=LOCAL_MAX_REPLICAS + 1),
            "parallelTrialCount: the job asks for 65 parallel trials",
        ),
        ("/hyperparameterTuningJobs", tuning_body(labels={"Bad": "x"}), "hyperparameterTuningJob.labels"),
        (
            "/persistentResources?persistentResourceId=huge",
            {
                "resourcePools": [
                    {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": str(10**30)}
                ]
            },
            "resourcePools[0].replicaCount: Invalid value (TYPE_INT64)",
        ),
    ],
)
def test_hostile_values_are_400_naming_the_field(
    emulator: Emulator, path: str, body: dict[str, Any], fragment: str
) -> None:
    status, message = post(emulator, path, body)
    assert status == 400, message
    assert fragment in message
