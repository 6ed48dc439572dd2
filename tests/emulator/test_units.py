"""Pure parts: configuration precedence, job names, request hashing, error classification, wire shapes."""

from __future__ import annotations

from typing import Any

import pytest

from vertexdist.backends.config import job_name, resolve_target
from vertexdist.backends.errors import api_error, is_transient
from vertexdist.backends.vertex.request import REQUEST_HASH_LABEL, request_hash
from vertexdist.emulator.filters import parse_filter
from vertexdist.errors import UsageError
from vertexdist.wire.proto_json import custom_job_spec_from_task_inputs, encode_enums


class FakeApiError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def test_flags_beat_the_template_which_beats_the_environment() -> None:
    env = {"GOOGLE_CLOUD_PROJECT": "env-proj", "GOOGLE_CLOUD_REGION": "europe-west4"}
    from_template = resolve_target(env=env, template_project="tpl-proj", template_location="us-central1")
    assert (from_template.project, from_template.location) == ("tpl-proj", "us-central1")
    from_flags = resolve_target(
        env=env, template_project="tpl-proj", project="flag-proj", location="asia-east1"
    )
    assert (from_flags.project, from_flags.location) == ("flag-proj", "asia-east1")
    from_env = resolve_target(env=env)
    assert (from_env.project, from_env.location) == ("env-proj", "europe-west4")


def test_endpoints_come_from_flags_then_environment() -> None:
    env = {"VERTEX_API_ENDPOINT": "http://127.0.0.1:9", "STORAGE_EMULATOR_HOST": "http://127.0.0.1:8"}
    target = resolve_target(env=env, template_project="p-123456")
    assert target.is_emulator and target.api_transport == "rest" and target.storage_endpoint.endswith(":8")
    real = resolve_target(env={}, template_project="p-123456", template_location="europe-west4")
    assert real.endpoint == "europe-west4-aiplatform.googleapis.com" and real.api_transport == "grpc"
    assert resolve_target(env={}, template_project="p", transport="rest").api_transport == "rest"
    with pytest.raises(UsageError, match="transport"):
        resolve_target(env={}, template_project="p", transport="carrier-pigeon")
    with pytest.raises(UsageError, match="only REST"):
        resolve_target(env=env, template_project="p", transport="grpc")


def test_no_project_anywhere_says_how_to_set_one() -> None:
    with pytest.raises(UsageError) as info:
        resolve_target(env={})
    assert info.value.exit_code == 2
    assert "--project" in (info.value.hint or "") and "--emulator" in (info.value.hint or "")


def test_job_names_accept_full_names_and_ids() -> None:
    target = resolve_target(env={}, project="proj-a", location="us-east1")
    full = "projects/p/locations/l/customJobs/77"
    assert job_name(full, target) == full
    assert job_name("123", target) == "projects/proj-a/locations/us-east1/trainingPipelines/123"
    with pytest.raises(UsageError):
        job_name("nope", target)


def test_request_hash_ignores_its_own_label_and_sees_every_other_change() -> None:
    request = {"parent": "p", "trainingPipeline": {"displayName": "a", "labels": {"team": "x"}}}
    digest = request_hash(request)
    labelled = {
        "parent": "p",
        "trainingPipeline": {"displayName": "a", "labels": {"team": "x", REQUEST_HASH_LABEL: digest}},
    }
    assert request_hash(labelled) == digest
    assert (
        request_hash({"parent": "p", "trainingPipeline": {"displayName": "b", "labels": {"team": "x"}}})
        != digest
    )
    assert len(digest) == 16 and digest == digest.lower()


@pytest.mark.parametrize(
    ("code", "message", "transient"),
    [
        (503, "unavailable", True),
        (500, "internal", True),
        (429, "Too many requests", True),
        (429, "Quota exceeded for quota metric custom_model_training_cpus", False),
        (400, "bad", False),
        (403, "denied", False),
        (404, "missing", False),
    ],
)
def test_which_errors_are_retried(code: int, message: str, transient: bool) -> None:
    assert is_transient(FakeApiError(code, message)) is transient


def test_api_errors_keep_the_server_message_and_add_a_hint() -> None:
    error = api_error(
        FakeApiError(403, "POST http://x/v1/p: Permission denied"), "creating", "proj", "us-central1"
    )
    assert error.message == "creating failed (403): Permission denied"
    assert "aiplatform" in (error.hint or "")


def test_sdk_task_inputs_become_a_camel_case_job_spec() -> None:
    inputs = {
        "worker_pool_specs": [
            {
                "machine_spec": {
                    "machine_type": "a2-highgpu-4g",
                    "accelerator_type": "NVIDIA_TESLA_A100",
                    "accelerator_count": 4.0,
                },
                "replica_count": 1.0,
                "python_package_spec": {
                    "executor_image_uri": "i",
                    "package_uris": ["gs://b/p.tar.gz"],
                    "python_module": "m",
                    "env": [{"name": "A_B", "value": "1"}],
                },
            }
        ],
        "base_output_directory": {"output_uri_prefix": "gs://b/out"},
        "scheduling": {"strategy": 4},
    }
    spec = custom_job_spec_from_task_inputs(inputs)
    pool = spec["workerPoolSpecs"][0]
    assert pool["replicaCount"] == 1 and isinstance(pool["replicaCount"], int)
    assert pool["machineSpec"] == {
        "machineType": "a2-highgpu-4g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 4,
    }
    assert pool["pythonPackageSpec"]["env"] == [{"name": "A_B", "value": "1"}]
    assert spec["scheduling"]["strategy"] == "SPOT"
    encoded = encode_enums({"state": "JOB_STATE_RUNNING", "jobSpec": spec}, as_int=True)
    assert encoded["state"] == 3
    assert encoded["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] == 8
    assert encoded["jobSpec"]["scheduling"]["strategy"] == 4
    assert spec["workerPoolSpecs"][0]["machineSpec"]["acceleratorType"] == "NVIDIA_TESLA_A100"  # not mutated


def test_list_filters() -> None:
    job = {"displayName": "a b", "state": "JOB_STATE_RUNNING", "labels": {"k": "v"}}
    assert parse_filter('labels.k="v" AND display_name="a b"')(job)
    assert not parse_filter("state=JOB_STATE_FAILED")(job)
    assert parse_filter("state!=JOB_STATE_FAILED")(job)
    with pytest.raises(ValueError, match="not supported"):
        parse_filter("create_time>2020")


@pytest.mark.parametrize(
    ("machine", "accelerator", "count"),
    [
        ("a2-highgpu-4g", "NVIDIA_TESLA_A100", 4),
        ("a2-highgpu-4g", "NVIDIA_A100_80GB", 4),
        ("a2-highgpu-4g", "NVIDIA_TESLA_A100", 3),
        ("n1-standard-4", "NVIDIA_TESLA_T4", 0),
        ("n1-standard-4", None, 2),
        ("a2-highgpu-4g", None, 0),
        ("g2-standard-4", "NVIDIA_L4", 1),
        ("n1-standrd-4", None, 0),
    ],
)
def test_the_emulator_refuses_exactly_what_validate_refuses(
    machine: str, accelerator: str | None, count: int
) -> None:
    from vertexdist.emulator.vertex.validation import job_spec_problems
    from vertexdist.spec.machine_rules import MachineChoice, check_machine

    machine_spec: dict[str, object] = {"machineType": machine}
    if accelerator:
        machine_spec["acceleratorType"] = accelerator
    if count:
        machine_spec["acceleratorCount"] = count
    spec = {
        "workerPoolSpecs": [
            {"machineSpec": machine_spec, "replicaCount": 1, "containerSpec": {"imageUri": "example.com/i"}}
        ]
    }
    template_errors = [
        f for f in check_machine(MachineChoice(machine, accelerator, count)) if f.severity == "error"
    ]
    emulator_problems = job_spec_problems(spec)
    assert bool(template_errors) == bool(emulator_problems), (template_errors, emulator_problems)
    assert len(emulator_problems) == len(template_errors)


def test_the_replica_tail_keeps_the_last_lines_trimmed(tmp_path: Any) -> None:
    from vertexdist.log_files import MESSAGE_TAIL_CHARS as TAIL_LINE_CHARS
    from vertexdist.log_files import MESSAGE_TAIL_LINES as TAIL_LINES
    from vertexdist.log_files import replica_tail

    log = tmp_path / "workerpool0-0.log"
    log.write_text("".join(f"line {i}\n" for i in range(30)) + "\n\n" + "y" * 1000 + "\n")
    tail = replica_tail(log).splitlines()
    assert tail[0] == "" and len(tail) == TAIL_LINES + 1  # it follows the message on new lines
    assert tail[1] == "line 21" and tail[-1] == "y" * (TAIL_LINE_CHARS - 3) + "..."
    assert replica_tail(tmp_path / "missing.log") == "" and replica_tail(None) == ""


@pytest.mark.parametrize(
    ("package", "output", "refused"),
    [
        ("gs://b/p.tar.gz", "gs://b/out", []),
        ("gs://b/p.tar.gz", "gs://b", []),
        ("/tmp/p.tar.gz", "gs://b/out", ["packageUris"]),
        ("gs://b", "gs://b/out", ["packageUris"]),  # a bucket is not a package
        ("gs://b/p.tar.gz", "gs://", ["outputUriPrefix"]),  # no bucket
        ("gs://b/p.tar.gz", "/tmp/out", ["outputUriPrefix"]),
    ],
)
def test_the_emulator_reads_gs_uris_as_the_wire_parser_does(
    package: str, output: str, refused: list[str]
) -> None:
    from vertexdist.emulator.vertex.validation import job_spec_problems

    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": 1,
        "pythonPackageSpec": {"executorImageUri": "i", "packageUris": [package], "pythonModule": "m"},
    }
    spec = {"workerPoolSpecs": [pool], "baseOutputDirectory": {"outputUriPrefix": output}}
    problems = job_spec_problems(spec)
    assert [
        field for field in ("packageUris", "outputUriPrefix") if any(field in p for p in problems)
    ] == refused
    assert len(problems) == len(refused), problems
