"""The GPUs this machine can give to replicas, found without importing torch (the CLI must stay light).

One rule on this side of the shipped wall: the shipped launcher's (`vertexdist_launcher.gpus`), which reads
CUDA_VISIBLE_DEVICES (`visible_devices`) and otherwise counts the driver's GPUs (`count_gpus`: /proc, else
`nvidia-smi`), so the host and the replicas agree on what this machine has."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from vertexdist.shipped.vertexdist_launcher.gpus import NVIDIA_PROC, count_gpus, visible_devices


def host_gpus(environ: Mapping[str, str] | None = None, *, proc: Path = NVIDIA_PROC) -> list[str]:
    """Device ids usable here: the user's CUDA_VISIBLE_DEVICES if set (the devices CUDA would see), else
    `0..n-1` for the driver's n GPUs."""
    env = os.environ if environ is None else environ
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return visible_devices(visible)
    return [str(index) for index in range(count_gpus(env, proc))]
