"""PipelineJobs on the emulator through the real SDK and kfp: one test per path (data flow, ParallelFor,
condition and exit handler; a failing task; a cancelled run; caching off)."""

# No `from __future__ import annotations`: kfp reads the components' annotations as types.

import contextlib
import uuid
from pathlib import Path
from typing import Any

from kfp import compiler, dsl
from kfp.dsl import Dataset, Input, Metrics, Output, PipelineTaskFinalStatus

from tests.pipelines.conftest import ROOT


@dsl.component
def make_data(rows: int, data: Output[Dataset]) -> str:
    with open(data.path, "w") as handle:
        handle.write("\n".join(str(i) for i in range(rows)))
    return data.uri


@dsl.component
def score(lr: float, data: Input[Dataset]) -> float:
    with open(data.path) as handle:
        rows = len(handle.read().splitlines())
    return lr * rows


@dsl.component
def best(scores: list, metrics: Output[Metrics]) -> float:
    metrics.log_metric("best", max(scores))
    return max(scores)


@dsl.component
def report(status: PipelineTaskFinalStatus, out: Output[Dataset]) -> None:
    with open(out.path, "w") as handle:
        handle.write(f"{status.state} {status.pipeline_task_name}")


@dsl.component
def fail_loudly() -> None:
    raise SystemExit("no data for this step")


@dsl.component
def wait_for_file(path: str) -> None:
    import os
    import time

    while not os.path.exists(path):
        time.sleep(0.05)


@dsl.pipeline(name="flow")
def flow(rows: int = 4) -> None:
    exit_task = report()
    with dsl.ExitHandler(exit_task):
        data = make_data(rows=rows)
        with dsl.ParallelFor([0.5, 1.0, 2.0]) as lr:
            each = score(lr=lr, data=data.outputs["data"])
        top = best(scores=dsl.Collected(each.output))
        with dsl.If(top.outputs["Output"] > 5.0):
            score(lr=10.0, data=data.outputs["data"]).set_display_name("big")
        with dsl.If(top.outputs["Output"] > 1000.0):
            score(lr=0.0, data=data.outputs["data"]).set_display_name("never")


def _compile(function: Any, folder: Path) -> str:
    path = folder / f"{function.name}.yaml"
    compiler.Compiler().compile(function, str(path))
    return str(path)


def _tasks(job: Any) -> dict[str, Any]:
    return {t.task_name: t for t in job.task_details}


def test_a_pipeline_runs_its_dag_with_data_loops_conditions_and_exit_handler(
    aip: Any, tmp_path: Path
) -> None:
    """...and, submitted with an experiment, is listed by get_experiment_df with its params and metrics."""
    job = aip.PipelineJob(
        display_name="flow",
        template_path=_compile(flow, tmp_path),
        pipeline_root=ROOT,
        parameter_values={"rows": 4},
        enable_caching=False,
    )
    job.submit(experiment="flows")
    job.wait()
    assert job.state.name == "PIPELINE_STATE_SUCCEEDED", job.gca_resource.error
    tasks = _tasks(job)
    assert tasks["best"].state.name == "SUCCEEDED"
    assert tasks["best"].execution.metadata["output:Output"] == 8.0  # 2.0 * 4 rows, from three iterations
    conditions = sorted(t.state.name for t in job.task_details if t.task_name.startswith("condition-"))
    assert conditions == ["NOT_TRIGGERED", "SUCCEEDED"]
    assert tasks["score-2"].execution.metadata["output:Output"] == 40.0
    assert "score-3" not in tasks
    iterations = [t for t in job.task_details if "-iteration-" in t.task_name]
    assert len(iterations) == 3
    data_uri = tasks["make-data"].outputs["data"].artifacts[0].uri
    assert data_uri.startswith(f"{ROOT}/")
    from google.cloud import storage

    bucket, _, key = data_uri.removeprefix("gs://").partition("/")
    assert storage.Client(project="pipe-proj").bucket(bucket).blob(key).download_as_text() == "0\n1\n2\n3"
    out = tasks["report"].outputs["out"].artifacts[0].uri
    bucket, _, key = out.removeprefix("gs://").partition("/")
    assert (
        storage.Client(project="pipe-proj")
        .bucket(bucket)
        .blob(key)
        .download_as_text()
        .startswith("SUCCEEDED")
    )
    rows = aip.get_experiment_df("flows").to_dict("records")
    assert len(rows) == 1
    assert rows[0]["run_name"] == job.job_id and rows[0]["run_type"] == "system.PipelineRun"
    assert rows[0]["param.rows"] == 4 and rows[0]["metric.best"] == 8.0
    assert rows[0]["state"] == "COMPLETE"
    run_context = aip.Context(job.gca_resource.job_detail.pipeline_run_context.name)
    graph = run_context.query_lineage_subgraph()
    data = next(a.name for a in graph.artifacts if a.uri == data_uri)
    ran = {e.name: e.display_name for e in graph.executions}
    links = sorted((ran[e.execution], e.type_.name) for e in graph.events if e.artifact == data)
    assert links == [("make-data", "OUTPUT")] + [("score", "INPUT")] * 3 + [("score-2", "INPUT")]


@dsl.pipeline(name="breaks")
def breaks() -> None:
    first = fail_loudly()
    make_data(rows=1).after(first)  # never starts: its upstream failed
    make_data(rows=2)  # independent: runs under the default (slow) failure policy


def test_a_failing_task_fails_the_run_and_is_named(aip: Any, tmp_path: Path) -> None:
    job = aip.PipelineJob(
        display_name="breaks",
        template_path=_compile(breaks, tmp_path),
        pipeline_root=ROOT,
        enable_caching=False,
    )
    job.submit()
    with contextlib.suppress(RuntimeError):  # the SDK raises on a failed job
        job.wait()
    assert job.state.name == "PIPELINE_STATE_FAILED"
    assert "fail-loudly" in job.gca_resource.error.message
    tasks = _tasks(job)
    assert tasks["fail-loudly"].state.name == "FAILED"
    assert "no data for this step" in tasks["fail-loudly"].error.message
    assert tasks["make-data"].state.name == "NOT_TRIGGERED"
    assert tasks["make-data-2"].state.name == "SUCCEEDED"


@dsl.pipeline(name="waits")
def waits(path: str) -> None:
    wait_for_file(path=path)


def test_cancel_stops_the_running_task(aip: Any, tmp_path: Path) -> None:
    never = tmp_path / "never-written"
    job = aip.PipelineJob(
        display_name="waits",
        template_path=_compile(waits, tmp_path),
        pipeline_root=ROOT,
        parameter_values={"path": str(never)},
        enable_caching=False,
    )
    job.submit()
    store = aip_store(job)
    store.wait_until(job.resource_name, lambda j: _task_state(j, "wait-for-file") == "RUNNING", 60)
    job.cancel()
    done = store.wait_until(job.resource_name, lambda j: j["state"] == "PIPELINE_STATE_CANCELLED", 60)
    assert done is not None and done["state"] == "PIPELINE_STATE_CANCELLED"
    assert _task_state(done, "wait-for-file") == "CANCELLED"


def _task_state(job: dict[str, Any], name: str) -> str:
    found = [d["state"] for d in job.get("jobDetail", {}).get("taskDetails", []) if d["taskName"] == name]
    return found[0] if found else ""


def aip_store(job: Any) -> Any:
    """The emulator's store, to wait on a task's state (an event) rather than poll with sleeps."""
    from tests.pipelines.conftest import current_emulator

    return current_emulator().store


@dsl.pipeline(name="cached")
def cached(rows: int = 3) -> None:
    data = make_data(rows=rows)
    score(lr=1.5, data=data.outputs["data"])


def test_caching_off_runs_tasks_an_earlier_run_has_cached(aip: Any, tmp_path: Path) -> None:
    """A cached rerun is checked end to end in test_training_step; here, that caching off runs again."""
    template = _compile(cached, tmp_path)
    runs = []
    for caching in (True, False):
        job = aip.PipelineJob(
            display_name="cached",
            # Its own id: the SDK's default is the display name and the second, and both runs can end within
            # one second now that a submit waits on nothing (409 ALREADY_EXISTS, as Vertex answers).
            job_id=f"cached-{'on' if caching else 'off'}-{uuid.uuid4().hex[:8]}",
            template_path=template,
            pipeline_root=ROOT,
            parameter_values={"rows": 7},  # this test's own inputs: no other test's cache entry matches
            enable_caching=caching,
        )
        job.submit()
        job.wait()
        runs.append(_tasks(job))
    first, uncached = runs
    assert [first[n].state.name for n in ("make-data", "score")] == ["SUCCEEDED", "SUCCEEDED"]
    assert [uncached[n].state.name for n in ("make-data", "score")] == ["SUCCEEDED", "SUCCEEDED"]
    assert (
        uncached["make-data"].outputs["data"].artifacts[0].uri
        != first["make-data"].outputs["data"].artifacts[0].uri
    )
