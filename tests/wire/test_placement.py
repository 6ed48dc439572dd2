"""Issue 26: does a job spec fit a persistent resource (the rule the emulator and `submit` share)."""

from __future__ import annotations

from typing import Any

from vertexdist.wire.placement import (
    describe_pools,
    fits_free,
    placement_problems,
    resource_problems,
    with_used,
)

GPU = {"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100", "acceleratorCount": 1}
RESOURCE: dict[str, Any] = {
    "name": "projects/p/locations/l/persistentResources/warm",
    "resourcePools": [
        {"id": "cpu", "machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "2"},
        {"id": "gpu", "machineSpec": GPU, "replicaCount": "4"},
    ],
}


def spec(*pools: tuple[dict[str, Any], int]) -> dict[str, Any]:
    return {"workerPoolSpecs": [{"machineSpec": m, "replicaCount": n} if n else {} for m, n in pools]}


def test_pools_within_the_resource_fit() -> None:
    assert (
        placement_problems(spec((GPU, 1), (GPU, 3), ({}, 0), ({"machineType": "n1-standard-4"}, 2)), RESOURCE)
        == []
    )


def test_a_machine_shape_the_resource_lacks_is_named_with_what_it_has() -> None:
    other = {**GPU, "acceleratorCount": 2}
    [problem] = placement_problems(spec((other, 1)), RESOURCE)
    assert "workerPoolSpecs[0] asks for a2-highgpu-1g with 2 x NVIDIA_TESLA_A100" in problem
    assert "n1-standard-4, a2-highgpu-1g with 1 x NVIDIA_TESLA_A100" in problem


def test_replicas_of_one_shape_are_counted_across_the_jobs_pools() -> None:
    [problem] = placement_problems(spec((GPU, 1), (GPU, 4)), RESOURCE)
    assert problem == (
        "workerPoolSpecs[0], workerPoolSpecs[1] ask for 5 replicas of a2-highgpu-1g with"
        " 1 x NVIDIA_TESLA_A100; persistent resource 'warm' holds 4"
    )


def test_an_autoscaling_pool_holds_its_maximum() -> None:
    scaled = {
        "resourcePools": [
            {
                "machineSpec": GPU,
                "replicaCount": "1",
                "autoscalingSpec": {"minReplicaCount": "1", "maxReplicaCount": "8"},
            }
        ]
    }
    assert placement_problems(spec((GPU, 8)), scaled) == []
    assert placement_problems(spec((GPU, 9)), scaled) != []


def test_a_running_resource_in_the_jobs_region_that_fits_has_no_problems() -> None:
    assert resource_problems(spec((GPU, 4)), {**RESOURCE, "state": "RUNNING"}, "l") == []


def test_another_region_and_a_resource_not_running_are_said_before_the_fit() -> None:
    problems = resource_problems(spec((GPU, 5)), {**RESOURCE, "state": "PROVISIONING"}, "europe-west4")
    assert problems == [
        "the persistent resource is in l, the job in europe-west4 (it must be the same)",
        "the persistent resource is PROVISIONING, not RUNNING",
        "workerPoolSpecs[0] ask for 5 replicas of a2-highgpu-1g with 1 x NVIDIA_TESLA_A100; persistent"
        " resource 'warm' holds 4",
    ]


def test_pools_are_described_with_their_replicas() -> None:
    assert describe_pools(RESOURCE["resourcePools"]) == (
        "2 x n1-standard-4, 4 x a2-highgpu-1g with 1 x NVIDIA_TESLA_A100"
    )


CPU_SHAPE = ("n1-standard-4", "ACCELERATOR_TYPE_UNSPECIFIED", 0)
GPU_SHAPE = ("a2-highgpu-1g", "NVIDIA_TESLA_A100", 1)


def test_a_job_fits_only_the_machines_other_jobs_do_not_hold() -> None:
    job = spec((GPU, 1), (GPU, 2))
    assert fits_free(job, RESOURCE, {GPU_SHAPE: 1})
    assert not fits_free(job, RESOURCE, {GPU_SHAPE: 2})
    assert fits_free(job, RESOURCE, {CPU_SHAPE: 2})  # the CPU machines in use are not the ones it needs


def test_used_replicas_are_shown_per_pool_within_what_each_holds() -> None:
    two_cpu_pools = {
        "resourcePools": [
            {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "2"},
            {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "3"},
        ]
    }
    pools = with_used(two_cpu_pools, {CPU_SHAPE: 4})["resourcePools"]
    assert [p["usedReplicaCount"] for p in pools] == ["2", "2"]
    assert [p["usedReplicaCount"] for p in with_used(RESOURCE, {})["resourcePools"]] == ["0", "0"]
