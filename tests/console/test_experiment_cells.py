"""The experiment page shows a param as it was set and a metric to 6 significant digits (issue 42, item 13:
`epochs` 3 showed as 3.0 and a loss as 0.123456789012)."""

from __future__ import annotations

import json
from pathlib import Path

from starlette.testclient import TestClient

from vertexdist.console.app import build_app
from vertexdist.console.jobs import Console
from vertexdist.console.registry import Registry
from vertexdist.errors import VertexdistError


def test_params_read_as_set_and_metrics_rounded(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "local-20261206-000000-abcdef"
    run.mkdir(parents=True)
    record = {
        "experiment": "sweep",
        "experiment_run": "run-1",
        "params": {"epochs": 3.0, "lr": 0.1, "optimizer": "sgd"},
        "metrics": {"loss": 0.123456789012, "steps": 200.0},
    }
    (run / "experiment_run.json").write_text(json.dumps(record))
    console = Console(tmp_path / "runs", cache_dir=tmp_path / "cache")
    page = TestClient(build_app(console, poll_s=0.05), base_url="http://127.0.0.1").get(
        "/experiments/local/sweep"
    )
    assert page.status_code == 200
    cells = page.text
    assert "<td>3</td>" in cells and "<td>0.1</td>" in cells and "<td>sgd</td>" in cells, cells
    assert '<td class="num">0.123457</td>' in cells and '<td class="num">200</td>' in cells, cells


class _Reader:
    """A remote experiment as the SDK reader gives it: one run named by another client with a display name
    that is no resource id (its series cannot be read by that name), one run as the SDK names it."""

    ODD = 'My run #2 <img src=x onerror="alert(1)">'

    def names(self) -> list[str]:
        return ["sweep"]

    def runs(self, experiment: str) -> list[dict[str, object]]:
        return [
            {"run_name": "run-1", "state": "COMPLETE", "params": {"lr": 0.1}, "metrics": {}},
            {"run_name": self.ODD, "state": "COMPLETE", "params": {"lr": 0.2}, "metrics": {}},
        ]

    def time_series(self, experiment: str, run: str) -> dict[str, list[list[float]]]:
        if run != "run-1":
            raise VertexdistError(
                f"reading run {run} of experiment {experiment} failed: not a valid resource id"
            )
        return {"loss": [[1, 0.5], [2, 0.25]]}


def test_a_run_whose_display_name_is_no_resource_id_shows_escaped_beside_the_others(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    console = Console(tmp_path / "runs", cache_dir=tmp_path / "cache")
    registry = Registry(tmp_path / "runs", experiments_reader=_Reader())
    client = TestClient(build_app(console, registry=registry, poll_s=0.05), base_url="http://127.0.0.1")
    page = client.get("/experiments/remote/sweep")
    assert page.status_code == 200, page.text
    assert "<img" not in page.text and "&lt;img src=x" in page.text
    assert "time series not readable for run(s): My run #2" in page.text
    data = client.get("/api/experiments/remote/sweep").json()
    series = {run["run"]: run["series"] for run in data["runs"]}
    assert series == {"run-1": {"loss": [[1, 0.5], [2, 0.25]]}, _Reader.ODD: {}}
