"""The template's `health.rendezvous_timeout` is torchrun's join timeout, rehearsed with `scattered_start`: a
spread beyond it fails the job at the rendezvous, in seconds, where torch's own 15 minutes would have waited.
(The 120 s spread that succeeds is measured by `bench/bench_scattered.py`.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.integration, pytest.mark.slow]
CLI = (sys.executable, "-m", "vertexdist")


def test_a_spread_beyond_the_templates_rendezvous_timeout_fails_at_the_rendezvous(tmp_path: Path) -> None:
    from vertexdist.spec.fault_plan import ScatteredStartFault

    (tmp_path / "user_script.py").write_text(
        "import torch.distributed as dist\ndist.init_process_group('gloo')\n"
    )
    doc = {
        "display_name": "scattered",
        "project": "my-project",
        "staging_bucket": "gs://my-bucket/staging",
        "container_uri": "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest",
        "machine_type": "n1-standard-4",
        "replica_count": 2,
        "health": {"rendezvous_timeout": "2s"},
        "trainer": {"script": "user_script.py", "launcher": "torchrun", "nproc_per_node": 1},
    }
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(doc))
    fault = {"kind": "scattered_start", "max_delay": "12s", "seed": 1}
    (tmp_path / "faults.yaml").write_text(yaml.safe_dump([fault]))
    delays = ScatteredStartFault(max_delay=12.0, seed=1).delays(["workerpool0-0", "workerpool1-0"])
    assert delays["workerpool1-0"] - delays["workerpool0-0"] > 8  # seed 1: the worker joins 8.6 s late
    run = tmp_path / "run"
    started = time.monotonic()
    done = subprocess.run(
        [*CLI, "local-run", "job.yaml", "--out", str(run), "--json", "--fault-plan", "faults.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    took = time.monotonic() - started
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["state"] == "JOB_STATE_FAILED", done.stderr
    chief = (run / "logs" / "workerpool0-0.log").read_text()
    assert "--rdzv-conf timeout=2" in chief
    assert "torchrun ended before its workers did" in chief, chief[-2000:]
    assert took < delays["workerpool1-0"] + 8, took  # at the rendezvous, not once both had joined
