"""`vertexdist ranks JOB --endpoint ...`: a job's ranks read from its replicas' logs through the real
google-cloud-logging client, as on Vertex (no heartbeat folder). Each replica's script writes its heartbeats
with the shipped watcher's own Vertex write path; rank 1 then dumps its stacks as a hung rank does."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from vertexdist.emulator import Emulator

pytestmark = pytest.mark.integration

PARENT = "projects/test-proj/locations/us-central1"
SHIPPED = Path(__file__).resolve().parents[2] / "vertexdist" / "shipped"
CODE = f"""\
import os, sys
sys.path.insert(0, {str(SHIPPED)!r})
from vertexdist_launcher import health
def fetch_shard(rank):
    rank.on_step()
    rank.sample()
    rank.write_beat()
rank = health.Watcher(os.environ)
rank.dir = None  # as on Vertex: heartbeats go into the replica's log
fetch_shard(rank)
fetch_shard(rank)
if rank.rank == 1:
    rank.stop_hung("hung: no progress for 9s; rank 1 is in fetch_shard")
"""


def test_ranks_of_a_job_reached_by_endpoint_come_from_its_logs(
    emu: Emulator, job_client: Any, pool: Any, cli: Any
) -> None:
    spec = {"worker_pool_specs": [pool(CODE, 1), pool(CODE, 1)]}
    job = job_client.create_custom_job(parent=PARENT, custom_job={"display_name": "ranks", "job_spec": spec})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not job_client.get_custom_job(name=job.name).end_time:
        time.sleep(0.05)

    code, out, err = cli("ranks", job.name, "--endpoint", emu.vertex_endpoint, "--json")
    assert code == 0, err
    found = json.loads(out)
    assert [(r["rank"], r["replica"], r["step"]) for r in found["ranks"]] == [
        (0, "workerpool0-0", 2),
        (1, "workerpool1-0", 2),
    ]
    assert found["verdict"] == "hung: no progress for 9s; rank 1 is in fetch_shard"

    code, out, err = cli("ranks", job.name, "--endpoint", emu.vertex_endpoint, "--stacks", "--json")
    assert code == 0, err
    dumps = json.loads(out)["stacks"]
    assert list(dumps) == ["1"]
    assert dumps["1"].startswith("rank 1 (workerpool1-0, local rank 0) at step 2\nThread MainThread")
    assert "in stop_hung" in dumps["1"], dumps


def test_the_consoles_ranks_panel_reads_a_remote_jobs_ranks_from_its_logs(
    emu: Emulator, job_client: Any, pool: Any, tmp_path: Path
) -> None:
    """The console on an endpoint alone (no emulator folder, as for Vertex): the Ranks panel's table, the
    culprit marked, from the replicas' heartbeat lines; a second read takes the lines after its cursor."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from vertexdist.backends.config import Target
    from vertexdist.console.app import build_app
    from vertexdist.console.jobs import Console, page_backend

    spec = {"worker_pool_specs": [pool(CODE, 1), pool(CODE, 1)]}
    job = job_client.create_custom_job(parent=PARENT, custom_job={"display_name": "panel", "job_spec": spec})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not job_client.get_custom_job(name=job.name).end_time:
        time.sleep(0.05)
    target = Target(
        project="test-proj",
        location="us-central1",
        api_transport="rest",
        api_endpoint=emu.vertex_endpoint,
        storage_endpoint=emu.storage_endpoint,
    )
    console = Console(tmp_path / "runs", page_backend(target), cache_dir=tmp_path / "cache")
    client = TestClient(build_app(console))
    url = "/api/ranks/vertex/customJobs/" + job.name.rsplit("/", 1)[-1]
    for _ in range(2):  # the second answer comes from the scan kept since the first
        panel = client.get(url).json()
        assert panel["note"] == "", panel
        assert [(r["rank"], r["step"], r["culprit"]) for r in panel["rows"]] == [(0, 2, False), (1, 2, True)]
        assert panel["verdict"] == "hung: no progress for 9s; rank 1 is in fetch_shard"
        assert panel["ended"] is True
    [follow] = console.rank_follows.values()
    assert follow.cursor is not None
