"""Reading a CustomJobSpec dict into the typed job (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from vertexdist.wire.job_spec import JobSpecError, parse_job_spec

PACKAGE = {"pythonModule": "trainer.task", "packageUris": ["gs://b/p/t-0.1.tar.gz"], "args": ["--epochs=1"]}


def _pool(replicas: int, **extra: Any) -> dict[str, Any]:
    return {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": replicas, **extra}


def test_pools_keep_their_slot_and_empty_slots_are_skipped() -> None:
    spec = {
        "workerPoolSpecs": [
            _pool(1, pythonPackageSpec=PACKAGE),
            {},
            _pool(
                2,
                containerSpec={
                    "imageUri": "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
                },
            ),
        ]
    }
    job = parse_job_spec(spec)
    assert [(p.index, p.replica_count, p.kind) for p in job.pools] == [
        (0, 1, "python_package"),
        (2, 2, "reduction_server"),
    ]
    assert job.node_count == 1 and job.replica_total == 3


def test_accelerators_count_only_with_a_type() -> None:
    typed = _pool(1, pythonPackageSpec=PACKAGE)
    typed["machineSpec"].update(acceleratorType="NVIDIA_TESLA_A100", acceleratorCount=4)
    untyped = _pool(1, pythonPackageSpec=PACKAGE)
    untyped["machineSpec"]["acceleratorCount"] = 4
    assert parse_job_spec({"workerPoolSpecs": [typed]}).pools[0].accelerator_count == 4
    assert parse_job_spec({"workerPoolSpecs": [untyped]}).pools[0].accelerator_count == 0


def test_scheduling_output_and_snake_case_keys() -> None:
    spec = {
        "worker_pool_specs": [
            {
                "replica_count": 1,
                "machine_spec": {"machine_type": "n1-standard-4"},
                "python_package_spec": {"python_module": "m.task", "package_uris": ["gs://b/x.tar.gz"]},
            }
        ],
        "base_output_directory": {"output_uri_prefix": "gs://b/out"},
        "scheduling": {"timeout": "90s", "restart_job_on_worker_restart": True},
    }
    job = parse_job_spec(spec)
    assert job.output_uri_prefix == "gs://b/out"
    assert job.timeout_s == 90.0 and job.restart_job_on_worker_restart
    assert job.pools[0].python_module == "m.task"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({}, "no workerPoolSpecs"),
        ({"workerPoolSpecs": [{}, _pool(2, pythonPackageSpec=PACKAGE)]}, "primary replica"),
        ({"workerPoolSpecs": [_pool(2, pythonPackageSpec=PACKAGE)]}, "replicaCount must be 1"),
        ({"workerPoolSpecs": [_pool(1)]}, "needs a pythonPackageSpec or a containerSpec"),
        ({"workerPoolSpecs": [_pool(1, containerSpec={"imageUri": "gcr.io/x/y"})]}, "has no command"),
        ({"workerPoolSpecs": [_pool(1, pythonPackageSpec={"pythonModule": "m"})]}, "packageUris"),
        ({"workerPoolSpecs": [_pool(1)] * 5}, "at most 4"),
    ],
)
def test_specs_that_cannot_run_say_why(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(JobSpecError, match=message):
        parse_job_spec(spec)


@pytest.mark.parametrize(("value", "seconds"), [("3600s", 3600.0), ("1.5s", 1.5), ("90m", 5400.0)])
def test_scheduling_timeout_reads_with_the_one_duration_parser(value: str | int, seconds: float) -> None:
    job = parse_job_spec(
        {"workerPoolSpecs": [_pool(1, pythonPackageSpec=PACKAGE)], "scheduling": {"timeout": value}}
    )
    assert job.timeout_s == seconds


@pytest.mark.parametrize("value", ["soon", "-5s", "0s", "10x", 120])
def test_bad_timeouts_are_errors_naming_the_field(value: str | int) -> None:
    spec = {"workerPoolSpecs": [_pool(1, pythonPackageSpec=PACKAGE)], "scheduling": {"timeout": value}}
    with pytest.raises(JobSpecError, match=r"scheduling\.timeout"):
        parse_job_spec(spec)
