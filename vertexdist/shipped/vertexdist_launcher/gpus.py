"""How many GPUs this machine gives the replica, without importing torch (which costs over a second)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")


def visible_devices(visible: str) -> list[str]:
    """The entries of a CUDA_VISIBLE_DEVICES value that CUDA uses: those before the first invalid one (an
    empty or negative entry; "-1" hides every device), as CUDA stops enumerating there.

    vertexdist's own side of the wall (`vertexdist.local.gpus`) uses this very function; the bundled trainer
    (`trainer_pkg.cluster.visible_gpu_count`) cannot import it and keeps a copy that
    tests/launcher/test_failures_and_gpus.py holds to the same answers."""
    devices = []
    for entry in visible.split(","):
        entry = entry.strip()
        if not entry or entry.startswith("-"):
            break
        devices.append(entry)
    return devices


def visible_count(visible: str) -> int:
    """How many devices CUDA_VISIBLE_DEVICES lets CUDA see (`visible_devices`)."""
    return len(visible_devices(visible))


def _nvidia_smi() -> int:
    try:
        listed = subprocess.run(
            ["nvidia-smi", "--list-gpus"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in listed.stdout.splitlines() if line.startswith("GPU "))


def count_gpus(env: Mapping[str, str], proc: Path = NVIDIA_PROC) -> int:
    """CUDA_VISIBLE_DEVICES when set, else the driver's GPUs (/proc, else `nvidia-smi`), else 0."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return visible_count(visible)
    if proc.is_dir():
        return sum(1 for _ in proc.iterdir())
    return _nvidia_smi()
