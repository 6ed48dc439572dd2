"""One PipelineJob's run: its DAGs walked in dependency order, ready tasks in parallel, as Vertex runs them.

Each task's progress is recorded in the job's `jobDetail.taskDetails` (`Recorder`): a root task named after
the pipeline, then one per DAG task, ParallelFor iteration and container task, with `parentTaskId`, times,
state and outputs. A failed task fails the run; under `PIPELINE_FAILURE_POLICY_FAIL_FAST` no new task starts
after it (exit handlers still run), otherwise independent branches go on. Cancel stops every running task's
process (its whole session) and starts nothing new but exit handlers.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertexdist.emulator.pipeline_runner import custom_job_step, dag
from vertexdist.emulator.pipeline_runner.cache import CachedOutputs, TaskCache, cache_key, caching_on
from vertexdist.emulator.pipeline_runner.conditions import ConditionError, evaluate
from vertexdist.emulator.pipeline_runner.lineage import PipelineLineage
from vertexdist.emulator.pipeline_runner.task_process import (
    EnvironmentCache,
    TaskOutcome,
    TaskProcess,
    executor_input,
    launch,
    packages_to_install,
    read_outcome,
    resolve_command,
)
from vertexdist.emulator.store import JobStore, is_terminal, new_id
from vertexdist.private_files import make_private_dir
from vertexdist.wire.proto_json import now_rfc3339

Resource = dict[str, Any]


@dataclass
class Workspace:
    """Where a run's tasks live: local folders, the mirrored Cloud Storage, the process environment."""

    tasks_dir: Path  # <data dir>/pipelines: one folder per job, one per task
    gcs_folder: Path  # what tasks see at /gcs
    envs: EnvironmentCache
    env: dict[str, str]
    sync_in: Callable[[], object] = lambda: None  # Cloud Storage -> /gcs before a task
    sync_out: Callable[[], object] = lambda: None  # /gcs -> Cloud Storage after it
    # The emulator's JobService, for google-cloud-pipeline-components' CustomJob steps: create(parent, body)
    # -> the stored job; cancel(name).
    cache: TaskCache | None = None  # earlier successful tasks' outputs (caching as Vertex does it)
    create_job: Callable[[str, Resource], Resource] | None = None
    cancel_job: Callable[[str], object] | None = None
    # The emulator's Model Registry, for GCPC's ModelUploadOp: upload(parent, UploadModelRequest body)
    # -> the new version.
    upload_model: Callable[[str, Resource], Resource] | None = None
    lineage: PipelineLineage | None = None  # the run's record in ML Metadata


class Recorder:
    """`jobDetail.taskDetails` of one PipelineJob in the store."""

    def __init__(self, store: JobStore, job_name: str) -> None:
        self.store = store
        self.job_name = job_name

    def add(self, name: str, parent: str | None, state: str, **fields: Any) -> str:
        task_id = _task_id()
        stamp = now_rfc3339()
        detail = {"taskId": task_id, "taskName": name, "createTime": stamp, "state": state, **fields}
        if state == "RUNNING":
            detail["startTime"] = stamp
        if state in ("SUCCEEDED", "FAILED", "SKIPPED", "NOT_TRIGGERED", "CANCELLED"):
            detail["endTime"] = stamp
        if parent is not None:
            detail["parentTaskId"] = parent
        self.store.update(
            self.job_name,
            lambda j: j.setdefault("jobDetail", {}).setdefault("taskDetails", []).append(detail),
        )
        return task_id

    def change(self, task_id: str, state: str | None = None, **fields: Any) -> None:
        def apply(job: Resource) -> None:
            for detail in job.get("jobDetail", {}).get("taskDetails", []):
                if detail["taskId"] == task_id:
                    detail.update(fields)
                    if state is not None:
                        detail["state"] = state
                        if state == "RUNNING":
                            detail.setdefault("startTime", now_rfc3339())
                        elif state in ("SUCCEEDED", "FAILED", "SKIPPED", "CANCELLED", "NOT_TRIGGERED"):
                            detail["endTime"] = now_rfc3339()

        self.store.update(self.job_name, apply)


def _task_id() -> str:
    """A task id: an int64 in PipelineTaskDetail, so below 2**63 (a job id's 19 digits may not fit)."""
    return str(10**17 + secrets.randbelow(9 * 10**17))


def artifact_details(artifacts: dag.Artifacts) -> dict[str, Any]:
    """Artifacts as PipelineTaskDetail's inputs/outputs show them (ArtifactList of metadata Artifacts)."""
    return {
        key: {
            "artifacts": [
                {
                    "displayName": a.get("name", key),
                    "uri": a.get("uri", ""),
                    "schemaTitle": a.get("type", {}).get("schemaTitle", "system.Artifact"),
                    "schemaVersion": a.get("type", {}).get("schemaVersion", "0.0.1"),
                    "metadata": a.get("metadata", {}),
                    "state": "LIVE",
                }
                for a in listed
            ]
        }
        for key, listed in artifacts.items()
    }


class PipelineRun:
    """Runs one stored PipelineJob to its end (`run()` in a thread of its own); `cancel()` from any thread."""

    def __init__(self, store: JobStore, job_name: str, workspace: Workspace) -> None:
        self.store = store
        self.job_name = job_name
        self.workspace = workspace
        job = store.get(job_name)
        assert job is not None
        self.job = job
        self.spec: Resource = job["pipelineSpec"]
        self.components: dict[str, Resource] = self.spec.get("components", {})
        self.executors: dict[str, Resource] = self.spec.get("deploymentSpec", {}).get("executors", {})
        runtime = job.get("runtimeConfig", {})
        self.pipeline_root = str(runtime.get("gcsOutputDirectory", "")).rstrip("/")
        self.fail_fast = runtime.get("failurePolicy") == "PIPELINE_FAILURE_POLICY_FAIL_FAST"
        self.recorder = Recorder(store, job_name)
        self.job_id = job_name.rsplit("/", 1)[-1]
        self.project = job_name.split("/")[1]
        self.location = job_name.split("/")[3]
        self.pipeline_name = str(self.spec.get("pipelineInfo", {}).get("name", "pipeline"))
        self.folder = workspace.tasks_dir / self.job_id
        self._lock = threading.Lock()
        self._running: dict[str, TaskProcess] = {}
        self._cancelled = threading.Event()
        self._failed = threading.Event()
        self.run_context = ""

    def parameters(self) -> dict[str, Any]:
        """The run's parameters: the root's defaults, then the job's runtimeConfig."""
        parameters = dict(self._defaults(self.spec.get("root", {})))
        parameters.update(self.job.get("runtimeConfig", {}).get("parameterValues", {}))
        return parameters

    def record_start(self) -> None:
        """The run's contexts in ML Metadata, named in its jobDetail (before the SDK's first Get)."""
        if self.workspace.lineage is None:
            return
        fields = self.workspace.lineage.start(self.job_name, self.pipeline_name, self.parameters())
        self.run_context = str(fields["pipelineRunContext"]["name"])
        self.store.update(self.job_name, lambda j: j.setdefault("jobDetail", {}).update(fields))

    def _record_task(
        self, name: str, state: str, params: dict[str, Any], inputs: dag.Artifacts, result: dag.Result
    ) -> None:
        if self.workspace.lineage is None or not self.run_context:
            return
        try:
            self.workspace.lineage.task(
                self.run_context,
                name,
                f"{self.job_id}-{name}-{secrets.token_hex(4)}"[-128:],
                state,
                params,
                inputs,
                result.artifacts,
            )
        except Exception:  # the record is a view of the run: a failure here never fails the task
            traceback.print_exc()

    # --- control ----------------------------------------------------------------------------------
    def cancel(self) -> None:
        self._cancelled.set()
        with self._lock:
            running = list(self._running.values())
        for process in running:
            process.stop()

    def run(self) -> str:
        """The run's final state (PIPELINE_STATE_*), recorded on the job."""
        make_private_dir(self.folder.parent)
        make_private_dir(self.folder)
        self.store.update(
            self.job_name, lambda j: j.update(state="PIPELINE_STATE_RUNNING", startTime=now_rfc3339())
        )
        root_id = self.recorder.add(self.pipeline_name, None, "RUNNING")
        root = self.spec.get("root", {})
        parameters = self.parameters()
        error = ""
        try:
            results = self._run_dag(root, dag.Scope(parameters, {}), root_id)
            failed = [r for r in results.values() if r.state == dag.FAILED]
            error = "; ".join(r.error for r in failed)
        except Exception as exc:  # a spec the runner cannot follow fails the run, named
            error = f"{type(exc).__name__}: {exc}"
            self._failed.set()
            traceback.print_exc()
        if self._cancelled.is_set():
            state = "CANCELLED"
        elif self._failed.is_set() or error:
            state = "FAILED"
        else:
            state = "SUCCEEDED"
        self.recorder.change(root_id, state, **({"error": {"code": 9, "message": error}} if error else {}))
        if self.workspace.lineage is not None and self.run_context:
            self.workspace.lineage.finish(self.run_context, state)

        def finish(job: Resource) -> None:
            job["state"] = f"PIPELINE_STATE_{state}"
            job["endTime"] = now_rfc3339()
            if state == "FAILED":
                job["error"] = {"code": 9, "message": f"The DAG failed because some tasks failed. {error}"}
            elif state == "CANCELLED":
                job["error"] = {"code": 1, "message": "CANCELLED"}

        self.store.update(self.job_name, finish)
        return state

    @staticmethod
    def _defaults(component: Resource) -> dict[str, Any]:
        parameters = component.get("inputDefinitions", {}).get("parameters", {})
        return {k: v["defaultValue"] for k, v in parameters.items() if "defaultValue" in v}

    def _stopping(self) -> bool:
        return self._cancelled.is_set() or (self.fail_fast and self._failed.is_set())

    # --- DAGs -------------------------------------------------------------------------------------
    def _run_dag(self, component: Resource, scope: dag.Scope, parent_id: str) -> dict[str, dag.Result]:
        tasks: dict[str, Resource] = component.get("dag", {}).get("tasks", {})
        dag.topological_order(tasks)  # refuse cycles and unknown names before anything starts
        pending = dict(tasks)
        done = threading.Condition()
        threads: list[threading.Thread] = []

        def start(name: str, task: Resource) -> None:
            def body() -> None:
                try:
                    result = self._run_task(name, task, scope, parent_id)
                except Exception as exc:
                    traceback.print_exc()
                    result = dag.Result(dag.FAILED, error=f"task {name!r}: {type(exc).__name__}: {exc}")
                if result.state == dag.FAILED:
                    self._failed.set()
                with done:
                    scope.results[name] = result
                    done.notify_all()

            thread = threading.Thread(target=body, name=f"pipeline-task-{name}", daemon=True)
            threads.append(thread)
            thread.start()

        with done:
            while pending or len(scope.results) < len(tasks):
                progressed = False
                for name in sorted(pending):
                    task = pending[name]
                    allowed = dag.may_start(task, scope.results)
                    if allowed is None:
                        continue
                    del pending[name]
                    progressed = True
                    if not allowed or (self._stopping() and not dag.waits_for_all(task)):
                        state = dag.CANCELLED if self._cancelled.is_set() else dag.NOT_TRIGGERED
                        self.recorder.add(name, parent_id, state)
                        scope.results[name] = dag.Result(state)
                        continue
                    start(name, task)
                if not progressed and (pending or len(scope.results) < len(tasks)):
                    done.wait()
        for thread in threads:
            thread.join()
        return scope.results

    def _run_task(self, name: str, task: Resource, scope: dag.Scope, parent_id: str) -> dag.Result:
        component_name = task.get("componentRef", {}).get("name", "")
        component = self.components.get(component_name)
        if component is None:
            raise dag.SpecError(
                f"task {name!r} names component {component_name!r}, which the spec does not have"
            )
        parameters = dag.resolve_parameters(task, scope, self.job_name, {})
        artifacts = dag.resolve_artifacts(task, scope)
        condition = task.get("triggerPolicy", {}).get("condition")
        if condition:
            try:
                holds = evaluate(condition, parameters)
            except ConditionError as exc:
                self.recorder.add(name, parent_id, dag.FAILED, error={"code": 3, "message": str(exc)})
                return dag.Result(dag.FAILED, error=f"task {name!r}: {exc}")
            if not holds:
                self.recorder.add(name, parent_id, dag.NOT_TRIGGERED)
                return dag.Result(dag.NOT_TRIGGERED)
        if "dag" in component:
            return self._run_sub_dag(name, task, component, parameters, artifacts, parent_id)
        return self._run_container(name, task, component, parameters, artifacts, parent_id)

    def _run_sub_dag(
        self,
        name: str,
        task: Resource,
        component: Resource,
        parameters: dict[str, Any],
        artifacts: dag.Artifacts,
        parent_id: str,
    ) -> dag.Result:
        task_id = self.recorder.add(name, parent_id, "RUNNING")
        if "parameterIterator" in task or "artifactIterator" in task:
            item_input, items, as_artifacts = dag.loop_items(task, parameters, artifacts)
            iterations: list[tuple[int, dict[str, Any], dag.Artifacts]] = []
            states: list[str] = []
            lock = threading.Lock()

            def one(index: int, item: Any) -> None:
                it_params = (
                    dict(parameters)
                    if as_artifacts
                    else dag.iteration_inputs(item_input, item, parameters, component)
                )
                it_artifacts = {**artifacts, item_input: item} if as_artifacts else dict(artifacts)
                it_id = self.recorder.add(f"{name}-iteration-{index}", task_id, "RUNNING")
                results = self._run_dag(component, dag.Scope(it_params, it_artifacts), it_id)
                state = self._dag_state(results)
                self.recorder.change(it_id, state)
                with lock:
                    states.append(state)
                    outputs = dag.dag_outputs(component, results)
                    iterations.append((index, outputs[0], outputs[1]))

            threads = [
                threading.Thread(target=one, args=(i, item), daemon=True) for i, item in enumerate(items)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            ordered = [(p, a) for _i, p, a in sorted(iterations, key=lambda x: x[0])]
            out_params, out_artifacts = dag.collect(ordered)
            state = (
                dag.FAILED
                if dag.FAILED in states
                else dag.CANCELLED
                if dag.CANCELLED in states
                else dag.SUCCEEDED
            )
        else:
            results = self._run_dag(component, dag.Scope(parameters, artifacts), task_id)
            out_params, out_artifacts = dag.dag_outputs(component, results)
            state = self._dag_state(results)
        error = f"a task inside {name!r} failed" if state == dag.FAILED else ""
        self.recorder.change(task_id, state, **({"error": {"code": 9, "message": error}} if error else {}))
        return dag.Result(state, out_params, out_artifacts, error=error)

    def _dag_state(self, results: dict[str, dag.Result]) -> str:
        states = {r.state for r in results.values()}
        if dag.FAILED in states:
            return dag.FAILED
        if dag.CANCELLED in states or self._cancelled.is_set():
            return dag.CANCELLED
        return dag.SUCCEEDED

    def _run_container(
        self,
        name: str,
        task: Resource,
        component: Resource,
        parameters: dict[str, Any],
        artifacts: dag.Artifacts,
        parent_id: str,
    ) -> dag.Result:
        executor = self.executors.get(component.get("executorLabel", ""), {})
        container = executor.get("container")
        if container is None:
            kind = sorted(executor) or ["nothing"]
            raise dag.SpecError(f"task {name!r}: executor {kind[0]!r} is not one the emulator runs")
        cache = self.workspace.cache if caching_on(task) else None
        key = cache_key(component, container, parameters, artifacts)
        hit = cache.get(key) if cache is not None else None
        if hit is not None:
            metadata = _execution_metadata(parameters, hit.parameters)
            self.recorder.add(
                name,
                parent_id,
                dag.SKIPPED,
                inputs=artifact_details(artifacts),
                outputs=artifact_details(hit.artifacts),
                execution={"metadata": metadata, "description": f"cached: the outputs of {hit.job}"},
            )
            return dag.Result(dag.SKIPPED, hit.parameters, hit.artifacts, task_name=name)
        result = self._run_uncached(name, component, container, parameters, artifacts, parent_id)
        self._record_task(name, result.state, parameters, artifacts, result)
        if cache is not None and result.state == dag.SUCCEEDED:
            cache.put(key, CachedOutputs(result.parameters, result.artifacts, self.job_name))
        return result

    def _run_uncached(
        self,
        name: str,
        component: Resource,
        container: Resource,
        parameters: dict[str, Any],
        artifacts: dag.Artifacts,
        parent_id: str,
    ) -> dag.Result:
        task_id = self.recorder.add(
            name,
            parent_id,
            "RUNNING",
            inputs=artifact_details(artifacts),
            execution={"metadata": {f"input:{k}": v for k, v in parameters.items()}},
        )
        task_dir = self.folder / f"{name}_{task_id}"
        make_private_dir(task_dir)
        gcs_root = f"{self.pipeline_root}/{self.project}/{self.job_id}/{name}_{task_id}"
        made, input_dict = executor_input(component, parameters, artifacts, task_dir / "outputs", gcs_root)
        command = resolve_command(
            container,
            input_dict,
            pipeline_name=self.pipeline_name,
            task_name=name,
            pipeline_root=self.pipeline_root,
            job_id=self.job_id,
        )
        if custom_job_step.is_custom_job_launcher(command):
            return self._run_custom_job(name, task_id, command, component, made, input_dict, parameters)
        if custom_job_step.is_model_upload_launcher(command):
            return self._run_model_upload(name, task_id, command, component, made, input_dict, parameters)
        self._record_main_job(task_id, task_dir / "log")
        try:
            python = self.workspace.envs.python_for(packages_to_install(command), task_dir / "log")
        except RuntimeError as exc:
            return self._fail(task_id, name, str(exc))
        self.workspace.sync_in()

        def started(process: TaskProcess) -> None:
            with self._lock:
                self._running[task_id] = process
            if self._cancelled.is_set():
                process.stop()

        env = {**self.workspace.env, "VERTEXDIST_PIPELINE_TASK": name}
        code = launch(
            command,
            python=python,
            task_dir=task_dir,
            gcs_folder=self.workspace.gcs_folder,
            env=env,
            on_start=started,
        )
        with self._lock:
            self._running.pop(task_id, None)
        self.workspace.sync_out()
        if self._cancelled.is_set():
            self.recorder.change(task_id, dag.CANCELLED)
            return dag.Result(dag.CANCELLED, error=f"task {name!r} was cancelled")
        if code != 0:
            return self._fail(
                task_id, name, f"the task's process exited with code {code}{self._log_tail(task_dir)}"
            )
        outcome = read_outcome(code, component, made, input_dict)
        return self._succeeded(task_id, name, parameters, outcome)

    def _succeeded(
        self, task_id: str, name: str, parameters: dict[str, Any], outcome: TaskOutcome, **extra: str
    ) -> dag.Result:
        """A task that ran to its end: its outputs and execution metadata recorded, its result."""
        metadata: dict[str, Any] = {**_execution_metadata(parameters, outcome.parameters), **extra}
        self.recorder.change(
            task_id,
            dag.SUCCEEDED,
            outputs=artifact_details(outcome.artifacts),
            execution={"metadata": metadata},
        )
        return dag.Result(dag.SUCCEEDED, outcome.parameters, outcome.artifacts, task_name=name)

    def _run_custom_job(
        self,
        name: str,
        task_id: str,
        command: list[str],
        component: Resource,
        made: Any,
        input_dict: Resource,
        parameters: dict[str, Any],
    ) -> dag.Result:
        """google-cloud-pipeline-components' CustomJob step: the job made in the emulator, waited for, and
        its resource name written where the launcher writes `gcp_resources`."""
        if self.workspace.create_job is None:
            return self._fail(task_id, name, "this emulator runs no CustomJobs for pipeline steps")
        try:
            call = custom_job_step.launcher_call(command)
            parent = f"projects/{call.project}/locations/{call.location}"
            job = self.workspace.create_job(parent, call.payload)
        except Exception as exc:  # a bad payload, or the job service refusing it (ApiError)
            return self._fail(
                task_id, name, f"its CustomJob could not be created: {getattr(exc, 'message', exc)}"
            )
        job_name = str(job["name"])
        self.recorder.change(task_id, executorDetail={"customJobDetail": {"job": job_name}})
        while True:
            found = self.store.wait_until(job_name, is_terminal, 1.0)
            if found is None or is_terminal(found):
                break
            if self._cancelled.is_set() and self.workspace.cancel_job is not None:
                with contextlib.suppress(Exception):
                    self.workspace.cancel_job(job_name)
                self.store.wait_until(job_name, is_terminal, 60.0)
                break
        found = self.store.get(job_name) or {}
        state = str(found.get("state", ""))
        if self._cancelled.is_set() or state == "JOB_STATE_CANCELLED":
            self.recorder.change(task_id, dag.CANCELLED)
            return dag.Result(dag.CANCELLED, error=f"task {name!r} was cancelled")
        if state != "JOB_STATE_SUCCEEDED":
            message = found.get("error", {}).get("message", state)
            return self._fail(task_id, name, f"its CustomJob {job_name} ended {state}: {message}")
        output = Path(call.gcp_resources)
        make_private_dir(output.parent)
        output.write_text(custom_job_step.gcp_resources(call.location, job_name))
        outcome = read_outcome(0, component, made, input_dict)
        return self._succeeded(task_id, name, parameters, outcome)

    def _run_model_upload(
        self,
        name: str,
        task_id: str,
        command: list[str],
        component: Resource,
        made: Any,
        input_dict: Resource,
        parameters: dict[str, Any],
    ) -> dag.Result:
        """google-cloud-pipeline-components' ModelUploadOp: the model registered in the emulator's Model
        Registry, and its version's name written where the launcher writes `gcp_resources`."""
        if self.workspace.upload_model is None:
            return self._fail(task_id, name, "this emulator has no Model Registry for pipeline steps")
        try:
            call = custom_job_step.upload_call(command)
            body: Resource = {"model": call.model}
            if call.parent_model:
                body["parentModel"] = call.parent_model
            self.workspace.sync_out()  # what earlier tasks wrote through /gcs, readable at the model's URI
            version = self.workspace.upload_model(f"projects/{call.project}/locations/{call.location}", body)
        except Exception as exc:  # a bad payload, or the registry refusing it (ApiError)
            return self._fail(task_id, name, f"its model upload failed: {getattr(exc, 'message', exc)}")
        uploaded = f"{version['name']}@{version['versionId']}"
        output = Path(call.gcp_resources)
        make_private_dir(output.parent)
        output.write_text(custom_job_step.gcp_resources(call.location, uploaded, kind="Model"))
        outcome = read_outcome(0, component, made, input_dict)
        return self._succeeded(task_id, name, parameters, outcome, model=uploaded)

    def _record_main_job(self, task_id: str, log: Path) -> None:
        """The task runs as a CustomJob on Vertex, named in `executorDetail.containerDetail.mainJob`
        (`projects/P/locations/L/customJobs/ID`); its lines are Cloud Logging entries of `ml_job` ID. Here
        the id is the task's own, and the job's `_taskLogs` (never served) maps it to the task's log file,
        so the emulated Logging API serves the task's output as that job's entries."""
        job_id = new_id()
        main_job = f"projects/{self.project}/locations/{self.location}/customJobs/{job_id}"

        def apply(job: Resource) -> None:
            job.setdefault("_taskLogs", {})[job_id] = {"log": str(log), "taskId": task_id}

        self.store.update(self.job_name, apply)
        self.recorder.change(task_id, executorDetail={"containerDetail": {"mainJob": main_job}})

    def _fail(self, task_id: str, name: str, message: str) -> dag.Result:
        error = f"task {name!r} failed: {message}"
        self.recorder.change(task_id, dag.FAILED, error={"code": 9, "message": error})
        return dag.Result(dag.FAILED, error=error)

    @staticmethod
    def _log_tail(task_dir: Path) -> str:
        with contextlib.suppress(OSError):
            lines = (task_dir / "log").read_text(errors="replace").strip().splitlines()
            if lines:
                return f"; its last line: {lines[-1][:300]}"
        return ""


def base_env(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **extra}


def _execution_metadata(inputs: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
    """A task execution's metadata as Vertex records it: `input:NAME` and `output:NAME` per parameter."""
    return {**{f"input:{k}": v for k, v in inputs.items()}, **{f"output:{k}": v for k, v in outputs.items()}}
