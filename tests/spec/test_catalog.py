"""The catalog data against the facts it was taken from (docs/reference/vertex.md §3.2)."""

from __future__ import annotations

import re

import pytest

from vertexdist.spec import catalog
from vertexdist.spec.catalog_data import MACHINES, SOURCE_URL


def test_has_a_source_url() -> None:
    assert SOURCE_URL.startswith("https://cloud.google.com/vertex-ai/docs/training/configure-compute")


@pytest.mark.parametrize("family", ["a2-highgpu", "a2-ultragpu", "a3-highgpu", "g4-standard"])
def test_counts_follow_the_machine_name(family: str) -> None:
    rows = [row for row in MACHINES.values() if row.name.startswith(family)]
    assert len(rows) == 4
    for row in rows:
        [(_, counts)] = row.accelerators.items()
        if family != "g4-standard":
            assert counts == (int(re.search(r"-(\d+)g$", row.name).group(1)),)  # type: ignore[union-attr]


def test_a100_parts() -> None:
    assert {r.name for r in catalog.machines_for_accelerator("NVIDIA_A100_80GB")} == {
        f"a2-ultragpu-{n}g" for n in (1, 2, 4, 8)
    }
    forty = {r.name for r in catalog.machines_for_accelerator("NVIDIA_TESLA_A100")}
    assert forty == {f"a2-highgpu-{n}g" for n in (1, 2, 4, 8)} | {"a2-megagpu-16g"}


@pytest.mark.parametrize(
    ("machine", "accelerator", "counts"),
    [
        ("g2-standard-4", "NVIDIA_L4", (1,)),
        ("g2-standard-32", "NVIDIA_L4", (1,)),
        ("g2-standard-24", "NVIDIA_L4", (2,)),
        ("g2-standard-48", "NVIDIA_L4", (4,)),
        ("g2-standard-96", "NVIDIA_L4", (8,)),
        ("a3-megagpu-8g", "NVIDIA_H100_MEGA_80GB", (8,)),
        ("a3-ultragpu-8g", "NVIDIA_H200_141GB", (8,)),
        ("a4-highgpu-8g", "NVIDIA_B200", (8,)),
        ("a4x-highgpu-4g", "NVIDIA_GB200", (4,)),
        ("n1-standard-8", "NVIDIA_TESLA_V100", (1, 2, 4, 8)),
        ("n1-highcpu-16", "NVIDIA_TESLA_V100", (2, 4, 8)),
        ("n1-highcpu-64", "NVIDIA_TESLA_P100", (4,)),
        ("n1-standard-96", "NVIDIA_TESLA_P100", ()),
        ("n2-standard-8", "NVIDIA_TESLA_T4", ()),
        ("e2-standard-4", "NVIDIA_L4", ()),
    ],
)
def test_allowed_counts(machine: str, accelerator: str, counts: tuple[int, ...]) -> None:
    assert catalog.allowed_counts(machine, accelerator) == counts


def test_three_gpus_are_never_valid() -> None:
    assert all(3 not in counts for row in MACHINES.values() for counts in row.accelerators.values())


def test_cpu_families_for_reducers_and_small_jobs() -> None:
    for family in ("n1-standard", "n1-highcpu", "n1-highmem", "n2-standard", "n2-highcpu", "n2-highmem",
                   "e2-standard", "e2-highcpu", "e2-highmem"):  # fmt: skip
        assert any(name.startswith(family) for name in MACHINES), family
    reducer = catalog.machine("n1-highcpu-16")
    assert reducer is not None and reducer.egress_gbps == 32.0 and reducer.vcpus == 16
    assert not catalog.is_accelerator_optimized("n1-highcpu-16")
    assert catalog.is_accelerator_optimized("a2-highgpu-1g")


def test_hyperdisk_default_on_rdma_machines() -> None:
    assert {r.name for r in MACHINES.values() if r.default_boot_disk_type == "hyperdisk-balanced"} == {
        "a3-ultragpu-8g", "a4-highgpu-8g", "a4x-highgpu-4g"
    }  # fmt: skip


def test_regions_and_close_matches() -> None:
    assert catalog.known_region("us-central1") and not catalog.known_region("us-central")
    assert catalog.close_match("europe-west", ["europe-west4", "us-east1"]) == "europe-west4"
    assert catalog.close_match("zzz", ["europe-west4"]) is None
    accelerators = ["NVIDIA_TESLA_A100", "NVIDIA_A100_80GB", "NVIDIA_B200"]
    assert catalog.close_matches("NVIDIA_A100", accelerators) == ["NVIDIA_A100_80GB", "NVIDIA_TESLA_A100"]
    hint = catalog.did_you_mean("a100", accelerators)
    assert hint == "did you mean 'NVIDIA_A100_80GB' or 'NVIDIA_TESLA_A100'?"


def test_every_offered_gpu_has_its_memory() -> None:
    from vertexdist.spec.catalog_data import ACCELERATORS, GPU_MEMORY_GB

    assert set(GPU_MEMORY_GB) == set(ACCELERATORS)
    for name, gb in GPU_MEMORY_GB.items():
        # The name Vertex gives a GPU and the catalog's description agree with the memory, where they say it.
        for said in re.findall(r"(\d+)GB", name + " " + ACCELERATORS[name]):
            assert float(said) == gb, name
    assert catalog.gpu_memory_gb("NVIDIA_TESLA_A100") == 40 and catalog.gpu_memory_gb(None) is None
    assert catalog.accelerator_name("NVIDIA_TESLA_A100") == "A100 40GB"
