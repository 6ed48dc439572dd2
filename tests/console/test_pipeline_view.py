"""The pipeline page's shaping (console.pipelines): dependency levels, task rows, the CustomJob link."""

from __future__ import annotations

import json
from typing import Any

from vertexdist.console.pipelines import custom_job_path, dependency_levels, pipeline_ref, pipeline_view

NAME = "projects/p/locations/us-central1/pipelineJobs/train-1"
JOB_URI = "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/customJobs/42"


def test_levels_follow_the_deepest_upstream_task() -> None:
    upstream = {"prep": [], "stats": [], "train": ["prep"], "eval": ["train", "stats"]}
    upstream["push"] = ["eval", "prep"]
    assert dependency_levels(upstream) == [["prep", "stats"], ["train"], ["eval"], ["push"]]
    assert dependency_levels({}) == []
    # A cycle or an unknown name is not looped on.
    assert dependency_levels({"a": ["b"], "b": ["a"], "c": ["nowhere"]}) == [["b", "c"], ["a"]]


def test_custom_job_link_comes_from_gcp_resources() -> None:
    made = json.dumps({"resources": [{"resourceType": "CustomJob", "resourceUri": JOB_URI}]})
    assert custom_job_path({"output:gcp_resources": made}) == "vertex/customJobs/42"
    model = json.dumps({"resources": [{"resourceType": "Model", "resourceUri": "x/models/1"}]})
    for metadata in ({}, {"output:gcp_resources": model}, {"output:gcp_resources": "{not json"}):
        assert custom_job_path(metadata) is None


def test_pipeline_refs_are_strict() -> None:
    assert pipeline_ref(NAME) is not None and pipeline_ref(NAME).path == "vertex/pipelineJobs/train-1"  # type: ignore[union-attr]
    for bad in ("projects/p/locations/l/pipelineJobs/..", "x/customJobs/1", "pipelineJobs/A_B", ""):
        assert pipeline_ref(bad) is None


def _task(ident: str, name: str, parent: str, state: str, **more: Any) -> dict[str, Any]:
    return {"taskId": ident, "taskName": name, "parentTaskId": parent, "state": state, **more}


def _running_job() -> dict[str, Any]:
    metadata = {"input:rows": 4.0, "output:Output": "gs://b/x"}
    outputs = {"data": {"artifacts": [{"uri": "gs://b/data", "schemaTitle": "system.Dataset"}]}}
    gcp = json.dumps({"resources": [{"resourceType": "CustomJob", "resourceUri": JOB_URI}]})
    job = {
        "name": NAME,
        "displayName": "<b>train</b>",
        "state": "PIPELINE_STATE_RUNNING",
        "runtimeConfig": {"parameterValues": {"rows": 4.0}},
        "pipelineSpec": {
            "pipelineInfo": {"name": "train"},
            "root": {"dag": {"tasks": {"prep": {}, "train": {"dependentTasks": ["prep"]}, "loop": {}}}},
        },
        "jobDetail": {
            "taskDetails": [
                {"taskId": "1", "taskName": "train", "state": "RUNNING"},  # the root task
                _task("2", "prep", "1", "SUCCEEDED", execution={"metadata": metadata}, outputs=outputs),
                _task("3", "train", "1", "RUNNING", execution={"metadata": {"output:gcp_resources": gcp}}),
                _task("4", "loop", "1", "RUNNING"),
                _task("5", "loop-iteration-0", "4", "FAILED", error={"message": "exit 1"}),
            ]
        },
    }
    return job


def test_view_lays_out_the_root_dag_and_nests_loop_tasks() -> None:
    view = pipeline_view(_running_job())
    assert view["state"] == "RUNNING" and not view["done"] and view["rootTask"] == "1"
    assert view["parameters"] == [{"name": "rows", "value": "4"}]
    assert [[t["name"] for t in level] for level in view["levels"]] == [["loop", "prep"], ["train"]]
    train = view["levels"][1][0]
    assert train["upstream"] == ["prep"] and train["customJob"] == "vertex/customJobs/42"
    rows = {t["name"]: t for t in view["tasks"]}
    assert [t["name"] for t in view["tasks"]] == ["prep", "train", "loop", "loop-iteration-0"]
    assert rows["loop-iteration-0"]["depth"] == 1 and rows["loop-iteration-0"]["error"] == "exit 1"
    assert rows["prep"]["inputs"] == [{"name": "rows", "value": "4"}]
    dataset = {"name": "data", "uri": "gs://b/data", "type": "system.Dataset"}
    assert rows["prep"]["outputArtifacts"] == [dataset]
    assert rows["train"]["outputs"] == []  # gcp_resources shows as the CustomJob link, not as text


def test_page_escapes_text_links_the_custom_job_and_reloads_while_running() -> None:
    from vertexdist.console.app import _environment

    job = _running_job()
    job["jobDetail"]["taskDetails"][4]["error"] = {"message": "<script>alert(1)</script>"}
    html = _environment().get_template("pipeline.html").render(p=pipeline_view(job), remote="")
    assert "<b>train</b>" not in html and "&lt;b&gt;train&lt;/b&gt;" in html
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)" in html
    assert html.count('href="/jobs/vertex/customJobs/42"') == 2  # its box in the graph, its row in the table
    assert 'data-refresh="5"' in html and 'data-level="1"' in html
