"""Renders equal what google-cloud-aiplatform builds, and parse into its protos with unknown fields rejected.

These tests import the SDK (slow, ~3 s once); the CLI never does.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from vertexdist.render import render_job_spec, render_request
from vertexdist.spec import JobTemplate, load_template

from .conftest import BASE, REPO_ROOT

aiplatform_v1 = pytest.importorskip("google.cloud.aiplatform_v1")
worker_spec_utils = pytest.importorskip("google.cloud.aiplatform.utils.worker_spec_utils")

SHIPPED = sorted((REPO_ROOT / "job_templates").glob("*.yaml"))
# A tuning template's request is a CreateHyperparameterTuningJob (tests/spec/test_tuning_sdk_parity.py).
PIPELINES = [p for p in SHIPPED if "\ntuning:" not in p.read_text()]


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)


def camel_case(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {_camel(k): camel_case(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [camel_case(v) for v in obj]
    return obj


def sdk_pools(t: JobTemplate, *, reduction_machine_type: str | None) -> list[dict[str, Any]]:
    spec = worker_spec_utils._DistributedTrainingSpec.chief_worker_pool(
        replica_count=t.replica_count,
        machine_type=t.machine_type,
        accelerator_count=t.accelerator_count,
        accelerator_type=t.accelerator_type or "ACCELERATOR_TYPE_UNSPECIFIED",
        boot_disk_type=t.boot_disk_type,
        boot_disk_size_gb=t.boot_disk_size_gb,
        reduction_server_replica_count=t.reduction_server_count,
        reduction_server_machine_type=reduction_machine_type,
    )
    return camel_case(spec.pool_specs)


def without_code(pools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in p.items() if k not in ("pythonPackageSpec", "containerSpec")} for p in pools]


def test_there_are_shipped_templates() -> None:
    names = {p.name for p in SHIPPED}
    assert {"a2-4g-x2.yaml", "cpu-small.yaml"} <= names
    assert len(names) >= 4


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_template_pools_equal_the_sdk_builder(path: Path) -> None:
    t = load_template(path)
    ours = render_job_spec(t)["workerPoolSpecs"]
    assert without_code(ours) == sdk_pools(t, reduction_machine_type=t.reduction_server_machine_type)


@pytest.mark.parametrize(
    ("replicas", "reducers", "gpu"), list(itertools.product([1, 2, 3, 5], [0, 1, 2, 16], [True, False]))
)
def test_pool_grid_equals_the_sdk_builder(replicas: int, reducers: int, gpu: bool) -> None:
    changes: dict[str, Any] = {"replica_count": replicas, "reduction_server_count": reducers}
    if not gpu:
        changes.update(machine_type="n1-standard-8", accelerator_type=None, accelerator_count=0)
    data = {**BASE, **changes}
    # Rules are not the subject here (a CPU job with reducers is an error); only the pool shapes are.
    t = JobTemplate.model_validate(
        {k: v for k, v in data.items() if v is not None}, context={"skip_rules": True}
    )
    ours = render_job_spec(t)["workerPoolSpecs"]
    assert without_code(ours) == sdk_pools(t, reduction_machine_type=t.reduction_server_machine_type)
    # Every non-empty training pool carries the code; the reduction pool carries the reducer image.
    for index, pool in enumerate(ours):
        if pool and index < 2:
            assert "pythonPackageSpec" in pool
        elif pool:
            assert pool["containerSpec"] == {"imageUri": t.reduction_server_container_uri}


def test_sdk_builder_bug_null_reducer_machine_type() -> None:
    """docs/reference/vertex.md §2.2: by default the SDK sends a null reducer machine type; we never do."""
    t = JobTemplate.model_validate({**BASE, "replica_count": 1, "reduction_server_count": 2},
                                   context={"skip_rules": True})  # fmt: skip
    sdk = sdk_pools(t, reduction_machine_type=None)
    assert sdk[1] == {} and sdk[2]["machineSpec"] == {"machineType": None}
    assert render_job_spec(t)["workerPoolSpecs"][2]["machineSpec"] == {"machineType": "n1-highcpu-16"}


def test_persistent_resource_id_equals_the_sdk_custom_job() -> None:
    """`CustomJob(..., persistent_resource_id=)` puts it into jobSpec.persistentResourceId; so do we."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform import jobs

    t = JobTemplate.model_validate({**BASE, "persistent_resource_id": "warm-pool-1"})
    ours = render_job_spec(t, package_uri="gs://vertexdist-demo/staging/p.tar.gz")
    # The SDK takes the pools as snake_case dicts, as a user's code writes them.
    pools = [
        aiplatform_v1.WorkerPoolSpec.to_dict(
            aiplatform_v1.WorkerPoolSpec.from_json(json.dumps(pool)), preserving_proto_field_name=True
        )
        for pool in ours["workerPoolSpecs"]
    ]
    job = jobs.CustomJob(
        display_name=t.display_name,
        worker_pool_specs=pools,
        base_output_dir=ours["baseOutputDirectory"]["outputUriPrefix"],
        project="vertexdist-demo",
        location=t.location,
        staging_bucket=t.staging_bucket,
        credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
        persistent_resource_id=t.persistent_resource_id,
    )
    sdk = json.loads(aiplatform_v1.CustomJobSpec.to_json(job._gca_resource.job_spec))
    assert sdk["persistentResourceId"] == ours["persistentResourceId"] == "warm-pool-1"
    # The SDK's whole job spec is ours, once ours is read into the proto (the same defaults filled in);
    # the SDK sets scheduling in run(), not in the constructor.
    ours.pop("scheduling", None)
    assert sdk == json.loads(
        aiplatform_v1.CustomJobSpec.to_json(
            aiplatform_v1.CustomJobSpec.from_json(json.dumps(ours), ignore_unknown_fields=False)
        )
    )


def test_persistent_resource_id_in_task_inputs_like_custom_training_job() -> None:
    """`CustomTrainingJob.run(persistent_resource_id=)` adds it to the pipeline's task inputs, as we do."""
    from types import SimpleNamespace

    from google.cloud.aiplatform import training_jobs

    t = JobTemplate.model_validate({**BASE, "persistent_resource_id": "warm-pool-1"})
    ours = render_request(t)["trainingPipeline"]["trainingTaskInputs"]
    inputs, _ = training_jobs._CustomTrainingJob._prepare_training_task_inputs_and_output_dir(
        SimpleNamespace(_staging_bucket=t.staging_bucket),  # type: ignore[arg-type]
        worker_pool_specs=ours["workerPoolSpecs"],
        base_output_dir=ours["baseOutputDirectory"]["outputUriPrefix"],
        persistent_resource_id=t.persistent_resource_id,
    )
    assert camel_case(inputs) == {k: v for k, v in ours.items() if k != "scheduling"}


def test_proto_parse_rejects_unknown_fields() -> None:
    """The parse below is a real check: an unknown key fails it."""
    good = render_job_spec(JobTemplate.model_validate(BASE))
    aiplatform_v1.CustomJobSpec.from_json(json.dumps(good), ignore_unknown_fields=False)
    bad = {**good, "workerPoolSpecs": [{**good["workerPoolSpecs"][0], "replica_count_typo": 1}]}
    with pytest.raises(Exception, match=re.compile("replica_count_typo|no field", re.I)):
        aiplatform_v1.CustomJobSpec.from_json(json.dumps(bad), ignore_unknown_fields=False)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_template_parses_into_custom_job_spec(path: Path) -> None:
    t = load_template(path)
    spec = render_job_spec(t, package_uri="gs://vertexdist-demo/staging/vertexdist/packages/ab/t-0.1.tar.gz")
    parsed = aiplatform_v1.CustomJobSpec.from_json(json.dumps(spec), ignore_unknown_fields=False)
    assert len(parsed.worker_pool_specs) == len(spec["workerPoolSpecs"])
    assert parsed.worker_pool_specs[0].machine_spec.machine_type == t.machine_type
    assert parsed.base_output_directory.output_uri_prefix == spec["baseOutputDirectory"]["outputUriPrefix"]
    if t.accelerator_type:
        assert parsed.worker_pool_specs[0].machine_spec.accelerator_type.name == t.accelerator_type
    if t.timeout:
        assert parsed.scheduling.timeout.total_seconds() == t.timeout


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.name)
def test_shipped_request_parses_into_create_training_pipeline_request(path: Path) -> None:
    request = render_request(load_template(path))
    parsed = aiplatform_v1.CreateTrainingPipelineRequest.from_json(
        json.dumps(request), ignore_unknown_fields=False
    )
    assert parsed.parent == request["parent"]
    assert (
        parsed.training_pipeline.training_task_definition
        == request["trainingPipeline"]["trainingTaskDefinition"]
    )
    # The task inputs travel as a protobuf Value; they must come back unchanged.
    pipeline = json.loads(aiplatform_v1.TrainingPipeline.to_json(parsed.training_pipeline))
    assert pipeline["trainingTaskInputs"] == json.loads(
        json.dumps(request["trainingPipeline"]["trainingTaskInputs"])
    )


def test_catalog_accelerators_are_sdk_enum_names() -> None:
    from vertexdist.spec.catalog_data import ACCELERATORS, MACHINES, RETIRED_ACCELERATORS

    enum_names = set(aiplatform_v1.AcceleratorType.__members__)
    assert set(ACCELERATORS) <= enum_names
    assert set(RETIRED_ACCELERATORS) <= enum_names
    for row in MACHINES.values():
        assert set(row.accelerators) <= set(ACCELERATORS), row.name


def test_strategies_are_sdk_enum_names() -> None:
    from vertexdist.spec.catalog_data import DEPRECATED_STRATEGIES, SCHEDULING_STRATEGIES

    names = set(aiplatform_v1.Scheduling.Strategy.__members__)
    assert set(SCHEDULING_STRATEGIES) | set(DEPRECATED_STRATEGIES) <= names
