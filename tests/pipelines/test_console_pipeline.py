"""The console's pipeline page over an emulator PipelineJob, read through PipelineService as on Vertex:
the job list shows it (kind "pipeline"), its page and `/api/pipelines/ID` show the DAG by level, each task's
state, times and inputs/outputs."""

# No `from __future__ import annotations`: kfp reads the components' annotations as types.

from pathlib import Path
from typing import Any

from kfp import compiler, dsl
from kfp.dsl import Dataset, Input, Output
from starlette.testclient import TestClient

from tests.pipelines.conftest import LOCATION, PROJECT, ROOT


@dsl.component
def write_rows(rows: int, data: Output[Dataset]) -> None:
    with open(data.path, "w") as handle:
        handle.write("\n".join(str(i) for i in range(rows)))


@dsl.component
def count_rows(data: Input[Dataset]) -> int:
    with open(data.path) as handle:
        return len(handle.read().splitlines())


@dsl.pipeline(name="two-steps")
def two_steps(rows: int = 3) -> None:
    made = write_rows(rows=rows)
    count_rows(data=made.outputs["data"])


def test_a_pipeline_run_lists_and_shows_its_dag_tasks_and_data(
    aip: Any, pipeline_emulator: Any, tmp_path: Path
) -> None:
    from vertexdist.backends.config import Target
    from vertexdist.console.app import build_app
    from vertexdist.console.jobs import Console, page_backend

    template = tmp_path / "two-steps.yaml"
    compiler.Compiler().compile(two_steps, str(template))
    job = aip.PipelineJob(
        display_name="<two steps>",
        template_path=str(template),
        pipeline_root=ROOT,
        parameter_values={"rows": 3},
        enable_caching=False,
    )
    job.submit()
    job.wait()
    assert job.state.name == "PIPELINE_STATE_SUCCEEDED", job.gca_resource.error
    target = Target(
        project=PROJECT,
        location=LOCATION,
        api_endpoint=pipeline_emulator.vertex_endpoint,
        storage_endpoint=pipeline_emulator.storage_endpoint,
        api_transport="rest",
    )
    console = Console(tmp_path / "runs", page_backend(target), cache_dir=tmp_path / "cache")
    client = TestClient(build_app(console))

    listed = client.get("/api/jobs").json()
    row = next(r for r in listed["jobs"] if r["ref"] == f"vertex/pipelineJobs/{job.job_id}")
    assert (row["kind"], row["state"], row["url"]) == ("pipeline", "SUCCEEDED", f"/pipelines/{job.job_id}")
    assert row["displayName"] == "<two steps>" and row["startTime"] and row["durationS"] is not None
    assert f'href="/pipelines/{job.job_id}"' in client.get("/", params={"kind": "pipeline"}).text

    view = client.get(f"/api/pipelines/{job.job_id}").json()
    assert view["state"] == "SUCCEEDED" and view["parameters"] == [{"name": "rows", "value": "3"}]
    assert [[t["name"] for t in level] for level in view["levels"]] == [["write-rows"], ["count-rows"]]
    tasks = {t["name"]: t for t in view["tasks"]}
    assert {t["state"] for t in tasks.values()} == {"SUCCEEDED"}
    assert all(t["started"] and t["ended"] for t in tasks.values())
    made = tasks["write-rows"]["outputArtifacts"][0]
    assert made["name"] == "data" and made["uri"].startswith(f"{ROOT}/")
    assert tasks["count-rows"]["inputArtifacts"][0]["uri"] == made["uri"]
    assert tasks["count-rows"]["outputs"] == [{"name": "Output", "value": "3"}]

    page = client.get(f"/pipelines/{job.job_id}")
    assert page.status_code == 200
    assert "&lt;two steps&gt;" in page.text and "<two steps>" not in page.text
    assert 'data-task="count-rows"' in page.text and made["uri"] in page.text
    assert "data-refresh" not in page.text  # an ended run's page stops reloading itself
    for bad in ("no-such-run", "UPPER", "a.b", "a%2Fb", "a/b"):
        assert client.get(f"/pipelines/{bad}").status_code == 404, bad
        assert client.get(f"/api/pipelines/{bad}").status_code == 404, bad
