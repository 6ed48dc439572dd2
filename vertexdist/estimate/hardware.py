"""Link speeds the step-time model needs, as data: NVLink per GPU, and what a node's GPUs send between nodes.

Sources (docs/reference/perf-reliability.md §(a) unless noted):
- NVLink, one direction per GPU: A100 600 GB/s bidirectional, so 300 each way (NVIDIA HGX A100 blog);
  H100/H200 SXM 900 GB/s, so 450 (glennklockwood.com/garden/processors/h100); B200/GB200 NVLink 5, 1.8 TB/s,
  so 900 (NVIDIA's HGX B200 page; not in the reference, not re-checked here). L4 and RTX PRO 6000 have no
  NVLink: they sit on PCIe 4.0 x16 and 5.0 x16 (vendor spec sheets), about 32 and 64 GB/s each way.
- Between nodes (cloud.google.com/compute/docs/gpus/gpu-network-bandwidth): GPU traffic on A2 and G2 uses the
  VM's NIC (the catalog's egress_gbps); A3 High has 4 x 200 Gbps GPU NICs (GPUDirect-TCPX; whether Vertex
  enables it is unverified), A3 Mega 8 x 200 (TCPXO), A3 Ultra and A4 8 x 400 Gbps GPU RDMA (3,200 of 3,600).
- Latency: about 0.12-0.16 ms per all-reduce between 2 nodes (measured: 2 x a3-megagpu-8g 123 us,
  2 x AWS p3dn 163 us) and 0.63 ms at 8 nodes; DDP buckets of 25 MiB (torch DDP `bucket_cap_mb`).
A value of None means "not known": the estimate says so instead of using a number.
"""

from __future__ import annotations

from vertexdist.spec import catalog

NVLINK_ONE_WAY_GB_S: dict[str, float] = {
    "NVIDIA_TESLA_A100": 300.0,
    "NVIDIA_A100_80GB": 300.0,
    "NVIDIA_H100_80GB": 450.0,
    "NVIDIA_H100_MEGA_80GB": 450.0,
    "NVIDIA_H200_141GB": 450.0,
    "NVIDIA_B200": 900.0,
    "NVIDIA_GB200": 900.0,
    "NVIDIA_L4": 32.0,
    "NVIDIA_RTX_PRO_6000": 64.0,
}

# Machines whose GPUs talk between nodes over their own NICs rather than the VM's.
GPU_NETWORK_GBPS: dict[str, float] = {
    "a3-highgpu-8g": 800.0,
    "a3-megagpu-8g": 1600.0,
    "a3-ultragpu-8g": 3200.0,
    "a4-highgpu-8g": 3200.0,
}

DDP_BUCKET_BYTES = 25 * 1024 * 1024
# Per-bucket latency between 2 nodes; it grows with log2(nodes), which puts 8 nodes at 0.45 ms
# (the measured 8-node AWS floor is 0.63 ms, so this is on the low side).
LATENCY_TWO_NODES_S = 0.15e-3


def nvlink_bytes_per_s(accelerator_type: str | None) -> float | None:
    """One-way bandwidth of one GPU to the others in its node, or None when not known."""
    gb_s = NVLINK_ONE_WAY_GB_S.get(accelerator_type or "")
    return gb_s * 1e9 if gb_s is not None else None


def node_network_gbps(machine_type: str) -> float | None:
    """What one node's GPUs can send to other nodes, in Gbit/s, or None when not known."""
    if machine_type in GPU_NETWORK_GBPS:
        return GPU_NETWORK_GBPS[machine_type]
    row = catalog.machine(machine_type)
    return row.egress_gbps if row else None


def egress_gbps(machine_type: str) -> float | None:
    """A CPU machine's egress (reduction servers), from the catalog."""
    row = catalog.machine(machine_type)
    return row.egress_gbps if row else None
