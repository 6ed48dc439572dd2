"""The Vertex AI training machine catalog, as data. Lookups live in `vertexdist.spec.catalog`.

Sources (checked against google-cloud-aiplatform 2.7.0 and the docs snapshot in docs/reference/vertex.md §3):
- Machine types and the accelerator counts each takes:
  https://cloud.google.com/vertex-ai/docs/training/configure-compute#gpu-compatibility-table
- Accelerator enum names: google.cloud.aiplatform_v1.types.AcceleratorType
- vCPU and memory: https://cloud.google.com/compute/docs/accelerator-optimized-machines and
  https://cloud.google.com/compute/docs/general-purpose-machines (n1: 3.75/6.5/0.9 GB per vCPU for
  standard/highmem/highcpu; n2 and e2: 4/8/1 GB per vCPU).
- Egress bandwidth (used for the Reduction Server sizing warning):
  https://cloud.google.com/compute/docs/network-bandwidth and
  https://cloud.google.com/compute/docs/gpus/gpu-network-bandwidth
  (2 Gbps per vCPU up to 32 Gbps on n1/n2, 16 Gbps on e2; A2 and G2 by shape; A3/A4 from the GPU NIC table).
- Regions with Vertex AI custom training: https://cloud.google.com/vertex-ai/docs/general/locations
A value of None means "not published in the sources above"; rules skip what they cannot know.
"""

from __future__ import annotations

from typing import NamedTuple

SOURCE_URL = "https://cloud.google.com/vertex-ai/docs/training/configure-compute#gpu-compatibility-table"


class MachineRow(NamedTuple):
    """One machine type: its accelerator options (type -> allowed counts), size and egress."""

    name: str
    accelerators: dict[str, tuple[int, ...]]
    vcpus: int | None
    memory_gb: float | None
    egress_gbps: float | None
    default_boot_disk_type: str = "pd-ssd"
    note: str = ""


# Accelerator enum names (aiplatform_v1 AcceleratorType) and what they are.
ACCELERATORS: dict[str, str] = {
    "NVIDIA_TESLA_P4": "NVIDIA P4 8GB",
    "NVIDIA_TESLA_P100": "NVIDIA P100 16GB",
    "NVIDIA_TESLA_V100": "NVIDIA V100 16GB",
    "NVIDIA_TESLA_T4": "NVIDIA T4 16GB",
    "NVIDIA_TESLA_A100": "NVIDIA A100 40GB",
    "NVIDIA_A100_80GB": "NVIDIA A100 80GB",
    "NVIDIA_L4": "NVIDIA L4 24GB",
    "NVIDIA_H100_80GB": "NVIDIA H100 80GB",
    "NVIDIA_H100_MEGA_80GB": "NVIDIA H100 80GB Mega (GPUDirect-TCPXO)",
    "NVIDIA_H200_141GB": "NVIDIA H200 141GB",
    "NVIDIA_B200": "NVIDIA B200 180GB",
    "NVIDIA_GB200": "NVIDIA GB200 180GB",
    "NVIDIA_RTX_PRO_6000": "NVIDIA RTX PRO 6000 96GB",
}

# Memory of one GPU in GB (10^9 bytes, as the vendors and the ZeRO paper count), for `estimate`'s memory
# planner. Source: Compute Engine's GPU table, https://cloud.google.com/compute/docs/gpus (GPU memory per
# machine type divided by its GPU count: a4-highgpu-8g 1,440 GB / 8, a4x-highgpu-4g 720 GB / 4,
# g4-standard-48 96 GB / 1; the P4 has 8 GB of GDDR5). Not every byte is the program's: the CUDA context and
# the allocator keep some, which the planner's headroom covers.
GPU_MEMORY_GB: dict[str, float] = {
    "NVIDIA_TESLA_P4": 8.0,
    "NVIDIA_TESLA_P100": 16.0,
    "NVIDIA_TESLA_V100": 16.0,
    "NVIDIA_TESLA_T4": 16.0,
    "NVIDIA_TESLA_A100": 40.0,
    "NVIDIA_A100_80GB": 80.0,
    "NVIDIA_L4": 24.0,
    "NVIDIA_H100_80GB": 80.0,
    "NVIDIA_H100_MEGA_80GB": 80.0,
    "NVIDIA_H200_141GB": 141.0,
    "NVIDIA_B200": 180.0,
    "NVIDIA_GB200": 180.0,
    "NVIDIA_RTX_PRO_6000": 96.0,
}
GPU_MEMORY_SOURCE_URL = "https://cloud.google.com/compute/docs/gpus"

# Names the API knows but Vertex training no longer offers, or offers only outside GPU pools.
RETIRED_ACCELERATORS: dict[str, str] = {
    "NVIDIA_TESLA_K80": "K80 GPUs are no longer offered by Vertex AI training",
    "TPU_V2": "TPUs need a single-pool TPU job, which vertexdist does not build",
    "TPU_V3": "TPUs need a single-pool TPU job, which vertexdist does not build",
    "TPU_V4_POD": "TPUs need a single-pool TPU job, which vertexdist does not build",
    "TPU_V5_LITEPOD": "TPUs need a single-pool TPU job, which vertexdist does not build",
}

_N1_GPU_TABLE: dict[str, dict[str, tuple[int, ...]]] = {
    # P4, P100, T4, V100 counts per n1 machine (configure-compute, N1 table).
    "small": {
        "NVIDIA_TESLA_P4": (1, 2, 4),
        "NVIDIA_TESLA_P100": (1, 2, 4),
        "NVIDIA_TESLA_T4": (1, 2, 4),
        "NVIDIA_TESLA_V100": (1, 2, 4, 8),
    },
    "16": {
        "NVIDIA_TESLA_P4": (1, 2, 4),
        "NVIDIA_TESLA_P100": (1, 2, 4),
        "NVIDIA_TESLA_T4": (1, 2, 4),
        "NVIDIA_TESLA_V100": (2, 4, 8),
    },
    "32": {
        "NVIDIA_TESLA_P4": (2, 4),
        "NVIDIA_TESLA_P100": (2, 4),
        "NVIDIA_TESLA_T4": (2, 4),
        "NVIDIA_TESLA_V100": (4, 8),
    },
    "highcpu-64": {
        "NVIDIA_TESLA_P4": (4,),
        "NVIDIA_TESLA_P100": (4,),
        "NVIDIA_TESLA_T4": (4,),
        "NVIDIA_TESLA_V100": (8,),
    },
    "large": {"NVIDIA_TESLA_P4": (4,), "NVIDIA_TESLA_T4": (4,), "NVIDIA_TESLA_V100": (8,)},
}

_N1_SHAPES: list[tuple[str, str]] = [
    ("n1-standard-4", "small"), ("n1-standard-8", "small"), ("n1-standard-16", "16"),
    ("n1-standard-32", "32"), ("n1-standard-64", "large"), ("n1-standard-96", "large"),
    ("n1-highmem-2", "small"), ("n1-highmem-4", "small"), ("n1-highmem-8", "small"),
    ("n1-highmem-16", "16"), ("n1-highmem-32", "32"), ("n1-highmem-64", "large"), ("n1-highmem-96", "large"),
    ("n1-highcpu-16", "16"), ("n1-highcpu-32", "32"), ("n1-highcpu-64", "highcpu-64"),
    ("n1-highcpu-96", "large"),
]  # fmt: skip

_GB_PER_VCPU = {
    "n1-standard": 3.75, "n1-highmem": 6.5, "n1-highcpu": 0.9,
    "n2-standard": 4.0, "n2-highmem": 8.0, "n2-highcpu": 1.0,
    "e2-standard": 4.0, "e2-highmem": 8.0, "e2-highcpu": 1.0,
}  # fmt: skip


def _vcpus(name: str) -> int:
    return int(name.rsplit("-", 1)[1])


def _general_purpose(name: str, accelerators: dict[str, tuple[int, ...]] | None = None) -> MachineRow:
    family = name.rsplit("-", 1)[0]
    vcpus = _vcpus(name)
    cap = 16.0 if name.startswith("e2-") else 32.0
    return MachineRow(
        name=name,
        accelerators=accelerators or {},
        vcpus=vcpus,
        memory_gb=round(vcpus * _GB_PER_VCPU[family], 2),
        egress_gbps=min(2.0 * vcpus, cap),
    )


def _rows() -> list[MachineRow]:
    rows: list[MachineRow] = []
    for name, kind in _N1_SHAPES:
        rows.append(_general_purpose(name, dict(_N1_GPU_TABLE[kind])))
    # CPU-only families Vertex training accepts (no GPUs can be attached to them).
    for name in (
        "n2-standard-4", "n2-standard-8", "n2-standard-16", "n2-standard-32", "n2-standard-48",
        "n2-standard-64", "n2-standard-80",
        "n2-highmem-2", "n2-highmem-4", "n2-highmem-8", "n2-highmem-16", "n2-highmem-32", "n2-highmem-48",
        "n2-highmem-64", "n2-highmem-80",
        "n2-highcpu-16", "n2-highcpu-32", "n2-highcpu-48", "n2-highcpu-64", "n2-highcpu-80",
        "e2-standard-4", "e2-standard-8", "e2-standard-16", "e2-standard-32",
        "e2-highmem-2", "e2-highmem-4", "e2-highmem-8", "e2-highmem-16",
        "e2-highcpu-16", "e2-highcpu-32",
    ):  # fmt: skip
        rows.append(_general_purpose(name))

    a2_egress = {1: 24.0, 2: 32.0, 4: 50.0, 8: 100.0}
    for gpus, vcpus, mem in ((1, 12, 85), (2, 24, 170), (4, 48, 340), (8, 96, 680)):
        rows.append(
            MachineRow(f"a2-highgpu-{gpus}g", {"NVIDIA_TESLA_A100": (gpus,)}, vcpus, mem, a2_egress[gpus])
        )
    rows.append(MachineRow("a2-megagpu-16g", {"NVIDIA_TESLA_A100": (16,)}, 96, 1360, 100.0))
    for gpus, vcpus, mem in ((1, 12, 170), (2, 24, 340), (4, 48, 680), (8, 96, 1360)):
        rows.append(
            MachineRow(f"a2-ultragpu-{gpus}g", {"NVIDIA_A100_80GB": (gpus,)}, vcpus, mem, a2_egress[gpus])
        )
    for gpus, vcpus, mem in ((1, 26, 234), (2, 52, 468), (4, 104, 936)):
        rows.append(MachineRow(f"a3-highgpu-{gpus}g", {"NVIDIA_H100_80GB": (gpus,)}, vcpus, mem, None))
    rows.append(MachineRow("a3-highgpu-8g", {"NVIDIA_H100_80GB": (8,)}, 208, 1872, 1000.0))
    rows.append(
        MachineRow("a3-megagpu-8g", {"NVIDIA_H100_MEGA_80GB": (8,)}, 208, 1872, 1800.0,
                   note="capacity through shared reservations or Spot is recommended")
    )  # fmt: skip
    rows.append(
        MachineRow("a3-ultragpu-8g", {"NVIDIA_H200_141GB": (8,)}, 224, 2952, 3600.0, "hyperdisk-balanced",
                   note="RDMA: start the command with `source /usr/local/gib/scripts/set_nccl_env.sh`")
    )  # fmt: skip
    rows.append(
        MachineRow("a4-highgpu-8g", {"NVIDIA_B200": (8,)}, 224, 3968, 3600.0, "hyperdisk-balanced",
                   note="RDMA: start the command with `source /usr/local/gib/scripts/set_nccl_env.sh`")
    )  # fmt: skip
    rows.append(
        MachineRow("a4x-highgpu-4g", {"NVIDIA_GB200": (4,)}, 140, 884, None, "hyperdisk-balanced",
                   note="requires a shared reservation")
    )  # fmt: skip
    g2_egress = {4: 10.0, 8: 16.0, 12: 16.0, 16: 32.0, 24: 32.0, 32: 32.0, 48: 50.0, 96: 100.0}
    for vcpus, gpus in ((4, 1), (8, 1), (12, 1), (16, 1), (32, 1), (24, 2), (48, 4), (96, 8)):
        rows.append(
            MachineRow(f"g2-standard-{vcpus}", {"NVIDIA_L4": (gpus,)}, vcpus, vcpus * 4.0, g2_egress[vcpus])
        )
    for vcpus, gpus in ((48, 1), (96, 2), (192, 4), (384, 8)):
        rows.append(MachineRow(f"g4-standard-{vcpus}", {"NVIDIA_RTX_PRO_6000": (gpus,)}, vcpus, None, None))
    return rows


MACHINES: dict[str, MachineRow] = {row.name: row for row in _rows()}

REGIONS: tuple[str, ...] = (
    "us-central1", "us-east1", "us-east4", "us-east5", "us-south1", "us-west1", "us-west2", "us-west3",
    "us-west4", "northamerica-northeast1", "northamerica-northeast2", "southamerica-east1",
    "southamerica-west1", "europe-central2", "europe-north1", "europe-southwest1", "europe-west1",
    "europe-west2", "europe-west3", "europe-west4", "europe-west6", "europe-west8", "europe-west9",
    "europe-west12", "asia-east1", "asia-east2", "asia-northeast1", "asia-northeast2", "asia-northeast3",
    "asia-south1", "asia-southeast1", "asia-southeast2", "australia-southeast1", "australia-southeast2",
    "me-central1", "me-central2", "me-west1", "africa-south1",
)  # fmt: skip

# Prebuilt Vertex training images (docs/reference/vertex.md §3.3); only `:latest` is supported.
DEFAULT_CONTAINER_URI = "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.2-4.py310:latest"
DEFAULT_REDUCTION_SERVER_CONTAINER_URI = (
    "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"
)
DEFAULT_REDUCTION_SERVER_MACHINE_TYPE = "n1-highcpu-16"
BOOT_DISK_TYPES: tuple[str, ...] = ("pd-ssd", "pd-standard", "hyperdisk-balanced")
BOOT_DISK_SIZE_RANGE_GB = (100, 64000)
SCHEDULING_STRATEGIES: tuple[str, ...] = ("STANDARD", "SPOT", "FLEX_START")
DEPRECATED_STRATEGIES: dict[str, str] = {"ON_DEMAND": "STANDARD", "LOW_COST": "SPOT"}
