"""The GPUs this machine can give to replicas, found without importing torch (the CLI must stay light).

CUDA_VISIBLE_DEVICES is read by the shipped launcher's rule (`vertexdist_launcher.gpus.visible_devices`), so
the host and the replicas agree on what it leaves visible."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from vertexdist.shipped.vertexdist_launcher.gpus import visible_devices


def host_gpus(environ: Mapping[str, str] | None = None) -> list[str]:
    """Device ids usable here: the user's CUDA_VISIBLE_DEVICES if set, else every NVIDIA GPU present."""
    env = os.environ if environ is None else environ
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return visible_devices(visible)
    driver = Path("/proc/driver/nvidia/gpus")
    if driver.is_dir():
        count = sum(1 for _ in driver.iterdir())
        return [str(i) for i in range(count)]
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return []
        return [str(i) for i, _ in enumerate(ln for ln in out.splitlines() if ln.startswith("GPU "))]
    return []
