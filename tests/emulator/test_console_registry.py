"""The console's Models and experiment pages against the session emulator: a model with two versions and an
alias, and two experiment runs with params, metrics and a loss time series, made through the SDK, read back
as JSON and as pages; a local run's experiment_run.json lists beside them. Values that would be markup are
escaped."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from vertexdist.backends.config import Target
from vertexdist.console.app import build_app
from vertexdist.console.jobs import Console, page_backend
from vertexdist.emulator import Emulator

pytestmark = [pytest.mark.integration]

SERVING = "us-docker.pkg.dev/vertex-ai/prediction/pytorch-cpu.2-4:latest"


@pytest.fixture(autouse=True)
def no_current_experiment() -> Iterator[None]:
    """The SDK's experiment tracker is module state: leave none set for the next test."""
    yield
    from google.cloud.aiplatform.metadata import metadata

    metadata._experiment_tracker.reset()
    metadata._experiment_tracker._global_tensorboard = None


def test_models_and_experiment_pages_show_the_sdks_models_and_runs(
    aiplatform: Any, emu: Emulator, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    first = aiplatform.Model.upload(
        display_name=f"<b>console-{tag}</b>",
        artifact_uri=f"gs://vd-staging/models/{tag}/v1",
        serving_container_image_uri=SERVING,
    )
    aiplatform.Model.upload(
        display_name=f"<b>console-{tag}</b>",
        artifact_uri=f"gs://vd-staging/models/{tag}/v2",
        serving_container_image_uri=SERVING,
        parent_model=first.resource_name,
        is_default_version=False,
        version_aliases=["candidate"],
    )
    experiment = f"console-{tag}"
    tensorboard = aiplatform.Tensorboard.create(display_name="console-tb")
    aiplatform.init(experiment=experiment, experiment_tensorboard=tensorboard)
    for run, lr in (("run-a", 0.1), ("run-b", 0.01)):
        aiplatform.start_run(run)
        aiplatform.log_params({"lr": lr})
        aiplatform.log_metrics({"accuracy": lr * 5})
        for step in (1, 2, 3):
            aiplatform.log_time_series_metrics({"loss": lr / step}, step=step)
        aiplatform.end_run()

    runs = tmp_path / "runs"
    (runs / "local-20240501-120000-ab12").mkdir(parents=True)
    record = {"experiment": "local-sweep", "experiment_run": "r1", "params": {"lr": 0.5},
              "metrics": {"loss": 0.2}, "time_series": {"loss": [[1, 0.4], [2, 0.2]]}}  # fmt: skip
    (runs / "local-20240501-120000-ab12" / "experiment_run.json").write_text(json.dumps(record))
    target = Target(
        project="test-proj", location="us-central1", api_endpoint=emu.vertex_endpoint, api_transport="rest"
    )
    console = Console(runs, page_backend(target), cache_dir=tmp_path / "cache")
    client = TestClient(build_app(console), base_url="http://127.0.0.1")

    models = client.get("/api/models").json()
    assert models["problem"] is None
    (model,) = [m for m in models["models"] if m["name"] == first.resource_name]
    assert [(v["version"], v["aliases"]) for v in model["versions"]] == [
        ("1", ["default"]),
        ("2", ["candidate"]),
    ]
    assert model["versions"][1]["artifactUri"].endswith(f"{tag}/v2")
    page = client.get("/models")
    assert page.status_code == 200 and first.resource_name in page.text and "candidate" in page.text
    assert f"&lt;b&gt;console-{tag}&lt;/b&gt;" in page.text and f"<b>console-{tag}" not in page.text

    listed = client.get("/api/experiments").json()["experiments"]
    assert {"name": experiment, "where": "remote"} in listed and {
        "name": "local-sweep",
        "where": "local",
    } in listed
    assert f'href="/experiments/remote/{experiment}"' in client.get("/experiments").text

    found = client.get(f"/api/experiments/remote/{experiment}").json()
    assert found["problem"] is None and found["params"] == ["lr"] and found["metrics"] == ["accuracy", "loss"]
    by_run = {r["run"]: r for r in found["runs"]}
    assert by_run["run-a"]["params"] == [0.1] and by_run["run-b"]["metrics"] == [
        pytest.approx(0.05),
        0.01 / 3,
    ]
    assert by_run["run-a"]["series"]["loss"] == [[1, 0.1], [2, 0.05], [3, pytest.approx(0.1 / 3)]]
    page = client.get(f"/experiments/remote/{experiment}")
    assert page.status_code == 200 and 'data-run="run-b"' in page.text and "param.lr" in page.text
    assert 'id="comparison"' in page.text and "/static/registry.js" in page.text

    local = client.get("/api/experiments/local/local-sweep").json()
    (run,) = local["runs"]
    assert (
        run["series"] == {"loss": [[1, 0.4], [2, 0.2]]} and run["job"] == "local/local-20240501-120000-ab12"
    )
    assert (
        'href="/jobs/local/local-20240501-120000-ab12"' in client.get("/experiments/local/local-sweep").text
    )
    for bad in ("/experiments/remote/..%2Fx", "/experiments/elsewhere/x", "/api/experiments/remote/UPPER"):
        assert client.get(bad).status_code == 404
