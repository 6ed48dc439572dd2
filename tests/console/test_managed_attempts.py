"""A local managed job in the console: its attempts (real local runs, recorded in the managed jobs' store)
list as kind "managed", each page has the Attempts section, and the attempts, which share one TensorBoard
folder, are charted each up to its own end and in its own series (its own colour)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from vertexdist.console.app import build_app
from vertexdist.console.jobs import Console
from vertexdist.console.managed import ManagedAttempts
from vertexdist.managed import store as st

pytestmark = [pytest.mark.integration]


def _write_scalars(folder: Path, steps: range, wall: float) -> None:
    """`loss` at `steps`, written (as the trainer's SummaryWriter writes) at wall times from `wall` on."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder))
    for i, step in enumerate(steps):
        value = summary_pb2.Summary.Value(tag="loss", simple_value=1.0 / (step + 1))
        event = event_pb2.Event(
            wall_time=wall + i * 1e-4, step=step, summary=summary_pb2.Summary(value=[value])
        )
        writer.add_event(event)
    writer.close()


@pytest.fixture(scope="module")
def managed(tmp_path_factory: pytest.TempPathFactory, kit: Any) -> dict[str, Any]:
    """Two attempts: the first preempted at step 47, the second resumed from step 40 to 94, both writing
    into the first attempt's folder (as `local-run` of a template with `recovery:` does)."""
    from vertexdist.backends.local import LocalBackend
    from vertexdist.backends.local.prepare import LocalOptions

    root = tmp_path_factory.mktemp("console-managed")
    runs = root / "runs"
    runs.mkdir()
    first = kit.run_local_job(runs, [kit.command_pool("print('attempt 1')")], "lm")
    second = kit.run_local_job(runs, [kit.command_pool("print('attempt 2')")], "lm")
    local = LocalBackend(LocalOptions(runs_dir=runs))
    shared = local.outputs(first).folder / "logs"
    shared.mkdir(parents=True, exist_ok=True)
    store = st.Store(root / "managed.sqlite")
    job = store.create(str(root / "job.yaml"), "local", {})
    for number, (name, steps) in enumerate(((first, range(0, 48)), (second, range(40, 95))), start=1):
        (runs / name / "managed.json").write_text(f'{{"label": "{job.id}-a{number}"}}')
        attempt = store.plan_attempt(job.id, 0, "us-central1", "n1-standard-4", "SPOT")
        store.created(attempt, name, str(runs / name))
        _write_scalars(shared, steps, time.time())
        time.sleep(0.05)
        store.ended(
            attempt,
            "FAILED" if number == 1 else "SUCCEEDED",
            "PREEMPTED" if number == 1 else "SUCCEEDED",
            None,
        )
        time.sleep(0.05)
    # Attempt 2 continues attempt 1's folder: its outputs are that folder.
    (local.outputs(second).folder).mkdir(parents=True, exist_ok=True)
    (local.outputs(second).folder / "logs").symlink_to(shared)
    store.close()
    console = Console(runs, cache_dir=root / "cache")
    console.attempt_sources.append(ManagedAttempts(root / "managed.sqlite"))
    client = TestClient(build_app(console, poll_s=0.05), base_url="http://127.0.0.1")
    return {"client": client, "first": first, "second": second}


def _series(client: TestClient, job: str) -> dict[str, list[int]]:
    answer = client.get(f"/api/metrics/local/{job}").json()
    return {s["run"]: [p[0] for p in s["points"]] for s in answer["series"] if s["tag"] == "loss"}


def test_local_attempts_list_as_managed_with_their_attempts(managed: dict[str, Any]) -> None:
    client = managed["client"]
    rows = {row["ref"]: row for row in client.get("/api/jobs").json()["jobs"]}
    assert rows[f"local/{managed['first']}"]["kind"] == "managed"
    page = client.get(f"/jobs/local/{managed['first']}").text
    assert 'id="attempts"' in page and "PREEMPTED" in page
    assert f'href="/jobs/local/{managed["second"]}"' in page


def test_each_attempt_is_charted_up_to_its_own_end(managed: dict[str, Any]) -> None:
    client = managed["client"]
    first = _series(client, managed["first"])
    assert first == {"attempt 1": list(range(0, 48))}  # never the next attempt's training
    second = _series(client, managed["second"])
    assert second == {"attempt 1": list(range(0, 48)), "attempt 2": list(range(40, 95))}
