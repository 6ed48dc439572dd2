"""What local-run shows of a tuning job: the live table (best marked, stopped-early said), the lines without
a terminal, the JSON events, and the closing lines with the best trial and its model folder."""

from __future__ import annotations

import io
import json

from vertexdist.cli.local_tune import best_lines
from vertexdist.cli.tuning_view import TrialJson, TrialLines, TrialTable
from vertexdist.tuning.driver import Snapshot
from vertexdist.wire.trials import Measurement, Trial

TRIALS = (
    Trial(
        "1",
        "SUCCEEDED",
        (("lr", 0.01), ("opt", "adam")),
        Measurement(3, {"acc": 0.9}),
        (Measurement(3, {"acc": 0.9}),),
    ),
    Trial(
        "2",
        "SUCCEEDED",
        (("lr", 0.3), ("opt", "sgd")),
        Measurement(1, {"acc": 0.2}),
        (Measurement(1, {"acc": 0.2}),),
    ),
    Trial("3", "ACTIVE", (("lr", 0.001), ("opt", "sgd")), None, (Measurement(2, {"acc": 0.5}),)),
)
SNAPSHOT = Snapshot(TRIALS, "RUNNING", "", best="1", stopped_early=frozenset({"2"}))


def test_the_live_table_marks_the_best_and_the_stopped() -> None:
    from rich.console import Console

    table = TrialTable("local-1", "acc", ["lr", "opt"])
    console = Console(record=True, width=120)
    console.print(table._render(SNAPSHOT))
    text = console.export_text()
    assert "tuning job local-1  RUNNING  3 trials" in text
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip()[:1].isdigit()}
    assert "1 *" in rows["1"] and "0.9" in rows["1"]
    assert "SUCCEEDED (stopped early)" in rows["2"]
    assert "ACTIVE" in rows["3"] and "0.5" in rows["3"]  # the latest value while it runs


def test_lines_and_json_say_each_change_once() -> None:
    out = io.StringIO()
    view = TrialLines(out, "acc")
    view.refresh(SNAPSHOT)
    view.refresh(SNAPSHOT)
    assert out.getvalue().splitlines() == [
        "trial 1 SUCCEEDED acc 0.9 (step 3)",
        "trial 2 SUCCEEDED (stopped early) acc 0.2 (step 1)",
        "trial 3 ACTIVE lr=0.001 opt=sgd",
    ]
    events = io.StringIO()
    TrialJson(events, "local-1").refresh(SNAPSHOT)
    first = json.loads(events.getvalue().splitlines()[0])
    assert first["event"] == "trial" and first["id"] == "1" and first["finalMeasurement"]["stepCount"] == 3


def test_the_closing_lines_name_the_best_trial_and_its_model_folder() -> None:
    summary = {
        "state": "JOB_STATE_SUCCEEDED",
        "run_dir": "/runs/x",
        "metric": "acc",
        "best": {
            "trial": "1",
            "parameters": {"lr": 0.0100000001, "opt": "adam"},
            "acc": 0.9,
            "modelDir": "/m/1",
        },
        "trials": [
            {"state": "SUCCEEDED", "stoppedEarly": False},
            {"state": "INFEASIBLE", "stoppedEarly": False},
            {"state": "SUCCEEDED", "stoppedEarly": True},
        ],
    }
    assert best_lines(summary) == [
        "tuning job JOB_STATE_SUCCEEDED: 3 trials, 1 failed, 1 stopped early",
        "best trial 1: acc 0.9  (lr=0.01, opt=adam)",
        "model folder: /m/1",
        "summary: /runs/x/summary.json",
    ]
