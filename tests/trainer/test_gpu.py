"""The trainer on a real GPU: NCCL backend, model on cuda, checkpoints with CUDA RNG state, resume.

Skipped without CUDA. Runs as a plain script too (`PYTHONPATH=. python tests/trainer/test_gpu.py`), for GPU
machines without the dev tools: it needs torch and the standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import pytest
except ImportError:  # plain-script mode on a bare GPU machine
    pytest = None  # type: ignore[assignment]

import torch

REPO_ROOT = Path(__file__).resolve().parents[2]
ARGS = [
    *("--samples", "8192", "--batch-size", "256", "--checkpoint-every", "8"),
    *("--device", "cuda", "--seed", "3"),
]


def _train(
    out: Path, epochs: int, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    drop = {"CLUSTER_SPEC", "TF_CONFIG", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(
        {
            "PYTHONPATH": str(REPO_ROOT),
            "AIP_MODEL_DIR": str(out / "model"),
            "AIP_CHECKPOINT_DIR": str(out / "checkpoints"),
            "TORCH_DISTRIBUTED_DEBUG": "OFF",
            **(extra_env or {}),
        }
    )
    cmd = [sys.executable, "-m", "trainer_pkg.task", "--epochs", str(epochs), *ARGS]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def check_single_gpu_trains_over_nccl_and_saves_the_model(tmp: Path) -> None:
    result = _train(tmp / "one", epochs=2, extra_env={"NCCL_DEBUG": "INFO"})
    print(result.stdout[-2000:], result.stderr[-3000:])
    assert result.returncode == 0, result.stderr
    assert "NCCL INFO" in result.stdout + result.stderr, "the process group did not use NCCL"
    state = torch.load(tmp / "one" / "model" / "model.pt", map_location="cpu")
    assert all(torch.isfinite(t).all() for t in state.values())
    lines = (tmp / "one" / "model" / "metrics.jsonl").read_text().splitlines()
    metrics = [json.loads(line) for line in lines]
    print("metrics:", metrics)
    assert len([m for m in metrics if "loss" in m]) >= 2


def check_resume_on_gpu_matches_an_uninterrupted_run(tmp: Path) -> None:
    straight = _train(tmp / "straight", epochs=3)
    assert straight.returncode == 0, straight.stderr
    first = _train(tmp / "resumed", epochs=1)
    assert first.returncode == 0, first.stderr
    second = _train(tmp / "resumed", epochs=3)
    print(second.stdout[-1500:])
    assert second.returncode == 0, second.stderr
    a = torch.load(tmp / "straight" / "model" / "model.pt", map_location="cpu")
    b = torch.load(tmp / "resumed" / "model" / "model.pt", map_location="cpu")
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    exact = all(torch.equal(a[k], b[k]) for k in a)
    print(f"resume on GPU: bit-exact={exact} max |diff|={diff:.3g}")
    assert diff < 1e-4


if pytest is not None:
    pytestmark = [
        pytest.mark.integration,
        pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (NCCL path)"),
    ]

    def test_single_gpu_trains_over_nccl_and_saves_the_model(tmp_path: Path) -> None:
        check_single_gpu_trains_over_nccl_and_saves_the_model(tmp_path)

    def test_resume_on_gpu_matches_an_uninterrupted_run(tmp_path: Path) -> None:
        check_resume_on_gpu_matches_an_uninterrupted_run(tmp_path)


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("no CUDA GPU visible on this machine")
    with tempfile.TemporaryDirectory() as scratch:
        check_single_gpu_trains_over_nccl_and_saves_the_model(Path(scratch))
        check_resume_on_gpu_matches_an_uninterrupted_run(Path(scratch))
    print("trainer GPU checks passed")
