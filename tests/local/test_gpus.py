"""On a machine with GPUs, each replica gets its own (CUDA_VISIBLE_DEVICES), as separate Vertex VMs would.

Skipped without GPUs. Runs as a plain script too (`python tests/local/test_gpus.py`), for GPU machines
without the dev tools: it needs only the standard library (and uses torch, if present, to count devices).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

try:
    import pytest
except ImportError:  # plain-script mode on a bare GPU machine
    pytest = None  # type: ignore[assignment]

from vertexdist.local import JobContext, JobState, start_job
from vertexdist.local.gpus import host_gpus

REPORT = (
    "import json, os\n"
    "try:\n"
    "    import torch\n"
    "    count = torch.cuda.device_count()\n"
    "except ImportError:\n"
    "    count = None\n"
    "spec = json.loads(os.environ['CLUSTER_SPEC'])\n"
    "print(json.dumps({'task': spec['task'], 'visible': os.environ.get('CUDA_VISIBLE_DEVICES'),"
    " 'nproc': os.environ.get('VERTEXDIST_NPROC_PER_NODE'), 'torch_devices': count}))\n"
)
REDUCER = {"imageUri": "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"}


def _spec(replicas: int, gpus_per_replica: int) -> dict[str, Any]:
    pool = {
        "machineSpec": {
            "machineType": "a2-highgpu-1g",
            "acceleratorType": "NVIDIA_TESLA_A100",
            "acceleratorCount": gpus_per_replica,
        },
        "containerSpec": {"imageUri": "x", "command": [sys.executable, "-c", REPORT]},
    }
    pools: list[dict[str, Any]] = [{**pool, "replicaCount": 1}]
    pools.append({**pool, "replicaCount": replicas - 1} if replicas > 1 else {})
    pools.append(
        {"machineSpec": {"machineType": "n1-highcpu-16"}, "replicaCount": 1, "containerSpec": REDUCER}
    )
    return {"workerPoolSpecs": pools}


def _run(spec: dict[str, Any], run_dir: Path) -> Any:
    ctx = JobContext(job_id="gpu", project="my-project", region="us-central1", gcs_root=str(run_dir / "gcs"))
    job = start_job(spec, ctx, run_dir=run_dir, fetch_package=lambda uri: Path(uri))
    return job, job.wait(120)


def check_each_replica_gets_its_own_gpus(tmp: Path) -> None:
    gpus = host_gpus()
    per_replica = max(1, len(gpus) // 2)
    replicas = 2 if len(gpus) >= 2 else 1
    job, result = _run(_spec(replicas, per_replica), tmp / "fit")
    assert result.state is JobState.SUCCEEDED, result
    seen = {}
    for name, log in job.log_paths().items():
        if name.startswith("workerpool2"):
            continue
        seen[name] = json.loads(log.read_text().strip().splitlines()[-1])
    print("host GPUs:", gpus, "per replica:", per_replica, "seen:", json.dumps(seen))
    visible = [s["visible"].split(",") for s in seen.values()]
    assert all(len(v) == per_replica for v in visible)
    flat = [d for v in visible for d in v]
    assert len(flat) == len(set(flat)) and set(flat) <= set(gpus)
    for s in seen.values():
        assert s["nproc"] == str(per_replica)
        if s["torch_devices"] is not None:
            assert s["torch_devices"] == per_replica


def check_too_few_gpus_is_a_clear_error(tmp: Path) -> None:
    gpus = host_gpus()
    _, result = _run(_spec(2, len(gpus)), tmp / "too-many")
    print("too few GPUs:", result.error)
    assert result.state is JobState.FAILED
    assert (
        f"needs {2 * len(gpus)} GPUs" in result.error.message
        and "--procs-per-replica" in result.error.message
    )


if pytest is not None:
    pytestmark = [
        pytest.mark.integration,
        pytest.mark.skipif(not host_gpus(), reason="needs a machine with NVIDIA GPUs"),
    ]

    def test_each_replica_gets_its_own_gpus(tmp_path: Path) -> None:
        check_each_replica_gets_its_own_gpus(tmp_path)

    def test_too_few_gpus_is_a_clear_error(tmp_path: Path) -> None:
        check_too_few_gpus_is_a_clear_error(tmp_path)


if __name__ == "__main__":
    if not host_gpus():
        sys.exit("no GPUs visible on this machine")
    with tempfile.TemporaryDirectory() as scratch:
        check_each_replica_gets_its_own_gpus(Path(scratch))
        check_too_few_gpus_is_a_clear_error(Path(scratch))
    print("GPU checks passed")
