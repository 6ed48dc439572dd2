"""Issue 42 part 6: rank health on the emulator the way Vertex runs it. A 2 x 2 torchrun job (DDP on gloo)
whose rank 3 is blocked by a fault plan's `hang` at a step (after 30 undisturbed steps, in which no
straggler may be flagged, nor beside the hung rank): each rank decides the hang itself, its heartbeat
and verdict lines go to its replica's log, and `vertexdist ranks JOB --json` through the endpoint alone (no
emulator folder, as a user who exported VERTEX_API_ENDPOINT) reads them through the Cloud Logging API: all
four ranks, and the verdict names rank 3, not a rank that waits for it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from vertexdist.emulator import Emulator
from vertexdist.spec.fault_plan import parse_fault_plan

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HANG_AT = 30  # undisturbed until then: no straggler may be flagged, nor beside the hung rank
# Knows nothing of vertexdist: a plain DDP loop (the fault plan blocks rank 3 from outside).
PLAIN = """\
import time
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
model = DDP(torch.nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1, 10_000):
    model(torch.randn(8, 4)).sum().backward()
    optimizer.step()
    time.sleep(0.02)
"""
PLAN = f"- kind: hang\n  replica: workerpool1-0\n  local_rank: 1\n  after_step: {HANG_AT}\n"


@pytest.fixture
def hanging(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Emulator]:
    emu = Emulator(
        data_dir=tmp_path / "emulator-data",
        procs_per_replica=2,
        fault_plan=parse_fault_plan(PLAN, "plan.yaml"),
    )
    emu.start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emu.storage_endpoint)
    monkeypatch.delenv("VERTEX_API_ENDPOINT", raising=False)
    try:
        yield emu
    finally:
        emu.stop()


def test_a_hang_on_the_emulator_read_through_its_endpoint_shows_every_rank_and_names_the_culprit(
    hanging: Emulator, cli: Any, tmp_path: Path
) -> None:
    (tmp_path / "user_script.py").write_text(PLAIN)
    doc = {
        "display_name": "hang-by-endpoint",
        "project": "test-proj",
        "location": "us-central1",
        "staging_bucket": "gs://vd-staging/staging",
        "container_uri": "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest",
        "machine_type": "n1-standard-4",
        "replica_count": 2,
        "health": {"hang_timeout": "5s"},
        "trainer": {"script": "user_script.py", "launcher": "torchrun", "nproc_per_node": 2},
    }
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(doc))
    code, out, err = cli(
        "submit", str(tmp_path / "job.yaml"), "--endpoint", hanging.vertex_endpoint, "--detach"
    )
    assert code == 0, err
    name = out.splitlines()[0]  # the training pipeline the script's job runs in

    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import PipelineServiceClient

    client = PipelineServiceClient(
        transport="rest",
        client_options={"api_endpoint": hanging.vertex_endpoint},
        credentials=AnonymousCredentials(),
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not client.get_training_pipeline(name=name).end_time:
        time.sleep(0.2)
    job = client.get_training_pipeline(name=name)
    assert job.state.name == "PIPELINE_STATE_FAILED", job

    code, out, err = cli("ranks", name, "--endpoint", hanging.vertex_endpoint, "--json")
    assert code == 0, err
    found = json.loads(out)
    ranks = {r["rank"]: r for r in found["ranks"]}
    assert sorted(ranks) == [0, 1, 2, 3], found
    assert ranks[3]["replica"] == "workerpool1-0" and ranks[3]["step"] == HANG_AT, found
    assert [ranks[r]["state"] for r in (0, 1, 2)] == ["waiting"] * 3, found
    assert not any(r["straggler"] for r in found["ranks"]), found
    verdict = found["verdict"]
    assert verdict.startswith("hung: no progress for "), found
    assert "; rank 3 (workerpool1-0, local rank 1) is in " in verdict, verdict
    assert f" at step {HANG_AT + 1}; ranks 0-2 wait in " in verdict, verdict
    # The job's error, as Vertex gives it: the emulator's is the verdict, the same culprit.
    assert "rank 3 (workerpool1-0, local rank 1)" in job.error.message, job.error

    code, out, err = cli("ranks", name, "--endpoint", hanging.vertex_endpoint, "--stacks", "--json")
    assert code == 0, err
    assert sorted(json.loads(out)["stacks"]) == ["0", "1", "2", "3"]  # every rank's dump, from its log

    # The emulator's monitor, which watched the heartbeat files all along, flagged no straggler either.
    jobs = tmp_path / "emulator-data" / "jobs"
    deadline = time.monotonic() + 30  # written as the job's supervisor ends, just after its state
    while not list(jobs.glob("*/health/summary.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    [summary] = jobs.glob("*/health/summary.json")
    assert json.loads(summary.read_text())["stragglers"] == []
