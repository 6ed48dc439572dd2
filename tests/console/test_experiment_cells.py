"""The experiment page shows a param as it was set and a metric to 6 significant digits (issue 42, item 13:
`epochs` 3 showed as 3.0 and a loss as 0.123456789012)."""

from __future__ import annotations

import json
from pathlib import Path

from starlette.testclient import TestClient

from vertexdist.console.app import build_app
from vertexdist.console.jobs import Console


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
