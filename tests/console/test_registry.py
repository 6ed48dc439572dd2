"""The console's Models and experiment data (`console.registry`), over small readers: a version links to the
pipeline that made it, runs line up by param and metric name, a failing reader is a problem line, and names
no experiment can have are refused before any call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vertexdist.console.registry import Registry, comparison, model_rows, version_row
from vertexdist.errors import VertexdistError


def test_a_version_links_to_the_pipeline_that_made_it() -> None:
    made = version_row(
        {"versionId": "2", "versionAliases": ["candidate"], "versionCreateTime": "2024-05-01T12:00:00Z",
         "trainingPipeline": "projects/p/locations/us-central1/trainingPipelines/123"}
    )  # fmt: skip
    assert made["job"] == "vertex/trainingPipelines/123" and made["aliases"] == ["candidate"]
    assert version_row({"versionId": "1"})["job"] is None
    assert version_row({"versionId": "1", "trainingPipeline": "projects/p/x/../secret"})["job"] is None


def test_models_carry_their_versions() -> None:
    models = [{"name": "projects/p/locations/l/models/9", "displayName": "m", "versionId": "1"}]
    rows = model_rows(
        models, lambda name: [{"versionId": "1"}, {"versionId": "2"}] if name.endswith("/9") else []
    )
    assert rows[0]["id"] == "9" and [v["version"] for v in rows[0]["versions"]] == ["1", "2"]


def test_runs_line_up_by_param_and_metric_name() -> None:
    found = comparison(
        [
            {"run_name": "a", "state": "COMPLETE", "params": {"lr": 0.1}, "metrics": {"acc": 0.5},
             "time_series_metrics": {"loss": 0.2}, "time_series": {"loss": [[1, 0.4], [2, 0.2]]}},
            {"run_name": "b", "state": "RUNNING", "params": {"opt": "adam"},
             "job": "local-20240501-120000-ab12"},
        ]
    )  # fmt: skip
    assert found["params"] == ["lr", "opt"] and found["metrics"] == ["acc", "loss"]
    a, b = found["runs"]
    assert a["params"] == [0.1, None] and a["metrics"] == [0.5, 0.2] and a["series"]["loss"][-1] == [2, 0.2]
    assert b["params"] == [None, "adam"] and b["metrics"] == [None, None] and b["series"] == {}
    assert (a["job"], b["job"]) == (None, "local/local-20240501-120000-ab12")
    (odd,) = comparison([{"run_name": "c", "job": "my-own-folder"}])["runs"]
    assert odd["job"] is None  # no job id: no link to a page that is not there


class Failing:
    calls = 0

    def names(self) -> list[str]:
        raise VertexdistError("emulator not answering")

    def runs(self, experiment: str) -> list[dict[str, Any]]:
        self.calls += 1
        raise VertexdistError("emulator not answering")

    def time_series(self, experiment: str, run: str) -> dict[str, list[list[float]]]:
        return {}


def test_a_failing_reader_is_a_problem_and_bad_names_make_no_call(tmp_path: Path) -> None:
    reader = Failing()
    registry = Registry(tmp_path, experiments_reader=reader)
    assert registry.experiments() == {"experiments": [], "problem": "emulator not answering"}
    assert registry.experiment("remote", "sweep") == {
        "experiment": "sweep", "where": "remote", "params": [], "metrics": [], "runs": [],
        "problem": "emulator not answering",
    }  # fmt: skip
    for where, name in (("remote", "../x"), ("remote", "UPPER"), ("elsewhere", "sweep"), ("remote", "")):
        assert registry.experiment(where, name) is None
    assert reader.calls == 1
    assert Registry(tmp_path).models()["problem"].startswith("no Vertex or emulator target")


class Project:
    """One project's models and experiments, as a reader over one target gives them."""

    def __init__(self, parent: str, experiments: dict[str, list[str]]) -> None:
        self.parent, self._experiments = parent, experiments

    def list_models(self, filter_text: str = "") -> list[dict[str, Any]]:
        return [{"name": f"{self.parent}/models/1", "displayName": self.parent, "versionId": "1"}]

    def versions(self, ref: str) -> list[dict[str, Any]]:
        assert ref.startswith(self.parent + "/"), ref  # asked of the project that holds it
        return [{"versionId": "1", "versionAliases": ["default"]}]

    def names(self) -> list[str]:
        return sorted(self._experiments)

    def runs(self, experiment: str) -> list[dict[str, Any]]:
        return [{"run_name": r, "state": "COMPLETE"} for r in self._experiments[experiment]]

    def time_series(self, experiment: str, run: str) -> dict[str, list[list[float]]]:
        assert run in self._experiments[experiment]
        return {}


def test_the_pages_read_every_project_the_emulator_holds(tmp_path: Path) -> None:
    # Issue 42, item 2: the pages read only vertexdist-local; the shipped templates use vertexdist-demo.
    from vertexdist.console.registry import EveryExperiment, EveryModel

    local = Project("projects/vertexdist-local/locations/us-central1", {})
    demo = Project("projects/vertexdist-demo/locations/us-central1", {"lr-sweep": ["run-a", "run-b"]})
    registry = Registry(tmp_path, EveryModel([local, demo]), EveryExperiment([local, demo]))
    models = registry.models()["models"]
    assert [m["displayName"] for m in models] == [local.parent, demo.parent]
    assert all(len(m["versions"]) == 1 for m in models)
    assert registry.experiments()["experiments"] == [{"name": "lr-sweep", "where": "remote"}]
    found = registry.experiment("remote", "lr-sweep")
    assert found is not None and [r["run"] for r in found["runs"]] == ["run-a", "run-b"]
