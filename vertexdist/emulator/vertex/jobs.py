"""The emulated Vertex services: JobService and PipelineService custom-training methods over the store.

Semantics follow https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.customJobs and
.../projects.locations.trainingPipelines: a CustomJob goes QUEUED -> PENDING (replicas being prepared) ->
RUNNING -> SUCCEEDED | FAILED | CANCELLED (via CANCELLING); with a provisioning delay
(`emulator start --provision-delay`) a job stays PENDING that long before its replicas start, unless it runs
on a persistent resource that exists (its machines are up already). A custom-task TrainingPipeline creates
one backing CustomJob (`trainingTaskMetadata.backingCustomJob`) and mirrors its state.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertexdist.emulator.capacity import CapacityFaults, accelerator_type, flex_wait_outcome, max_wait_s
from vertexdist.emulator.execution import JobRunner, LaunchRequest, RunningJob
from vertexdist.emulator.filters import parse_filter
from vertexdist.emulator.preemption import Preemptions
from vertexdist.emulator.store import TERMINAL_STATES, JobStore, Resource, is_terminal, new_id
from vertexdist.emulator.vertex import validation
from vertexdist.emulator.vertex.resource_use import ReplicaLedger
from vertexdist.wire import capacity_errors
from vertexdist.wire.enums import job_to_pipeline_state
from vertexdist.wire.model_shapes import one_message, upload_problems
from vertexdist.wire.proto_json import (
    CUSTOM_TASK_DEFINITION,
    custom_job_spec_from_task_inputs,
    normalize_job_spec,
    now_rfc3339,
)

# Internal fields of stored resources start with "_" and never leave the emulator.
PIPELINE_KEY = "_pipeline"
PIDS_KEY = "_pids"
TRIAL_KEY = "_trial"  # a tuning trial's CustomJob: {"id", "metricDir", "tuningJob"}
_PARENT = re.compile(r"^projects/([^/]+)/locations/([^/]+)$")
_SUPERVISE_INTERVAL_S = 0.05
_log = logging.getLogger(__name__)
# google.rpc.Code values used in `error` of failed jobs.
_CODE_CANCELLED = 1
_CODE_INTERNAL = 13
_CODE_FAILED_PRECONDITION = 9


@dataclass
class ApiError(Exception):
    """An error the REST front end returns as `{"error": {code, message, status}}`."""

    code: int
    status: str
    message: str

    @classmethod
    def invalid(cls, message: str) -> ApiError:
        return cls(400, "INVALID_ARGUMENT", message)

    @classmethod
    def not_found(cls, name: str) -> ApiError:
        return cls(404, "NOT_FOUND", f'The resource "{name}" was not found.')


def parse_parent(parent: str) -> tuple[str, str]:
    match = _PARENT.match(parent)
    if not match:
        raise ApiError.invalid(f"parent {parent!r} must look like projects/PROJECT/locations/LOCATION")
    return match.group(1), match.group(2)


class EmulatorService:
    """Create/Get/List/Cancel for CustomJobs and TrainingPipelines, and the job execution behind them."""

    def __init__(
        self,
        store: JobStore,
        runner: JobRunner,
        *,
        work_dir: Path,
        fetch_package: Any,
        hold_get_s: float = 0.0,
        publish_outputs: Callable[[dict[str, Any]], object] | None = None,
        stage_inputs: Callable[[], object] | None = None,
        capacity: CapacityFaults | None = None,
        provision_delay_s: float = 0.0,
    ) -> None:
        self.store = store
        # How long a job stays PENDING before its replicas start (Vertex provisioning its machines); a job
        # on an existing persistent resource skips it.
        self.provision_delay_s = provision_delay_s
        # The fault plan's capacity faults (emulator start --fault-plan); none by default.
        self.capacity = capacity or CapacityFaults()
        self._preemptions: dict[str, Preemptions] = {}
        self._publish_outputs = publish_outputs
        # Before a job starts: what its replicas read at /gcs made current (the emulated Cloud Storage's).
        self._stage_inputs = stage_inputs
        self._runner = runner
        self._work_dir = Path(work_dir)
        self._fetch_package = fetch_package
        self.hold_get_s = hold_get_s
        # (pipeline, its succeeded job) -> fields the pipeline gets, e.g. the uploaded model (models.py).
        self.on_pipeline_success: Callable[[Resource, Resource], dict[str, Any]] | None = None
        # (parent, job spec, where) -> raises ApiError when the persistent resource it names cannot take it.
        self.check_placement: Callable[[str, dict[str, Any], str], None] | None = None
        self._running: dict[str, RunningJob] = {}
        # The persistent resources' machines that jobs hold (usedReplicaCount); a job waits QUEUED for them.
        self.replicas = ReplicaLedger(store)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reap_orphans()
        self._supervisor = threading.Thread(target=self._supervise, name="emulator-supervisor", daemon=True)
        self._supervisor.start()

    # --- JobService -------------------------------------------------------------------------------
    def create_custom_job(
        self,
        parent: str,
        body: dict[str, Any],
        *,
        pipeline: str | None = None,
        trial: dict[str, str] | None = None,
    ) -> Resource:
        project, location = parse_parent(parent)
        self._check_location(location)
        if not body.get("displayName"):
            raise ApiError.invalid("customJob.displayName is required")
        if pipeline is None and trial is None:  # a pipeline's and a trial's job come from a checked body
            self._check_resource(body, "customJob")
        try:
            spec = normalize_job_spec(body.get("jobSpec") or {})
        except ValueError as exc:
            raise ApiError.invalid(f"customJob.jobSpec.{exc}") from None
        self._check_spec(spec, "customJob.jobSpec")
        if self.check_placement is not None:
            self.check_placement(parent, spec, "customJob.jobSpec")
        if pipeline is None and trial is None:
            self._refuse_for_quota(location, spec, parent)
        job = _new_resource(parent, "customJobs", body, "JOB_STATE_QUEUED", jobSpec=spec)
        if pipeline:
            job[PIPELINE_KEY] = pipeline
        if trial:
            job[TRIAL_KEY] = dict(trial)
        created = self.store.insert(job)
        self._launch_later(created["name"], project, location, pipeline)
        return created

    # --- PipelineService --------------------------------------------------------------------------
    def create_training_pipeline(self, parent: str, body: dict[str, Any]) -> Resource:
        _project, location = parse_parent(parent)
        self._check_location(location)
        if not body.get("displayName"):
            raise ApiError.invalid("trainingPipeline.displayName is required")
        self._check_resource(body, "trainingPipeline")
        definition = body.get("trainingTaskDefinition")
        if definition != CUSTOM_TASK_DEFINITION:
            raise ApiError.invalid(
                f"trainingPipeline.trainingTaskDefinition {definition!r} is not supported by the emulator;"
                f" it runs custom training ({CUSTOM_TASK_DEFINITION})"
            )
        try:
            spec = custom_job_spec_from_task_inputs(body.get("trainingTaskInputs"))
        except ValueError as exc:
            raise ApiError.invalid(f"trainingPipeline.trainingTaskInputs.{exc}") from None
        self._check_spec(spec, "trainingPipeline.trainingTaskInputs")
        if self.check_placement is not None:
            self.check_placement(parent, spec, "trainingPipeline.trainingTaskInputs")
        self._refuse_for_quota(location, spec, parent)
        pipeline = _new_resource(
            parent,
            "trainingPipelines",
            body,
            "PIPELINE_STATE_PENDING",
            trainingTaskDefinition=definition,
            trainingTaskInputs=body.get("trainingTaskInputs"),
        )
        if body.get("modelToUpload") is not None or body.get("modelId") or body.get("parentModel"):
            model = body.get("modelToUpload") or {}
            if isinstance(model, dict) and "displayName" not in model:
                model = {**model, "displayName": body["displayName"]}  # it takes the pipeline's
            asked = {"model": model, "modelId": body.get("modelId"), "parentModel": body.get("parentModel")}
            problems = [
                (f"trainingPipeline.{field.replace('model.', 'modelToUpload.', 1)}", what)
                for field, what in upload_problems(asked, parent)
            ]
            if problems:
                raise ApiError.invalid(one_message(problems))
        for passthrough in ("inputDataConfig", "modelToUpload", "modelId", "parentModel"):
            if passthrough in body:
                pipeline[passthrough] = body[passthrough]
        self.store.insert(pipeline)
        job_body = {"displayName": body["displayName"], "jobSpec": spec, "labels": pipeline["labels"]}
        job = self.create_custom_job(parent, job_body, pipeline=pipeline["name"])
        return self.store.update(
            pipeline["name"],
            lambda p: p.update(trainingTaskMetadata={"backingCustomJob": job["name"]}),
        )

    # --- shared -----------------------------------------------------------------------------------
    def get(self, name: str) -> Resource:
        found = self.store.get(name)
        if found is None:
            raise ApiError.not_found(name)
        if self.hold_get_s > 0 and not is_terminal(found):
            # Long-poll: the SDK sleeps 5 s after each non-final Get, so answering once the job ends
            # (or the hold runs out) makes SDK runs fast without changing what they observe.
            found = self.store.wait_until(name, is_terminal, self.hold_get_s) or found
        return found

    def list(
        self, parent: str, collection: str, filter_text: str = "", page_size: int = 0, page_token: str = ""
    ) -> tuple[list[Resource], str]:
        parse_parent(parent)
        try:
            keep = parse_filter(filter_text)
        except ValueError as exc:
            raise ApiError.invalid(str(exc)) from None
        items = [r for r in self.store.list(parent, collection) if keep(r)]
        try:
            start = int(page_token) if page_token else 0
        except ValueError:
            raise ApiError.invalid(f"page_token {page_token!r} is not valid") from None
        size = page_size if page_size > 0 else 100
        page = items[start : start + size]
        more = start + size < len(items)
        return page, (str(start + size) if more else "")

    def cancel(self, name: str) -> None:
        found = self.store.get(name)
        if found is None:
            raise ApiError.not_found(name)
        if is_terminal(found):
            raise ApiError(
                400,
                "FAILED_PRECONDITION",
                f"Cannot cancel {name}: it is already in state {found['state']}.",
            )
        job_name = found.get("trainingTaskMetadata", {}).get("backingCustomJob", name)
        if "/trainingPipelines/" in name:
            self.store.update(name, lambda p: p.update(state="PIPELINE_STATE_CANCELLING"))
        self._request_cancel(job_name)

    def log_files(self, name: str) -> dict[str, Path]:
        """Replica name -> log file of a CustomJob, running or not; a pipeline's are its CustomJob's."""
        found = self.store.get(name)
        if found is None:
            raise ApiError.not_found(name)
        job_name = found.get("trainingTaskMetadata", {}).get("backingCustomJob", name)
        with self._lock:
            handle = self._running.get(job_name)
        return handle.log_files() if handle else self._saved_log_files(job_name)

    def close(self, grace_s: float = 15.0) -> None:
        """Stop supervising, then stop every running job's replicas and wait for them to be gone.

        Supervision stops first, so jobs that were running stay RUNNING in the store; the next start from
        the same data folder marks them FAILED with the reason (the emulator went away under them).
        """
        self._stop.set()
        self._supervisor.join(timeout=5)
        with self._lock:
            handles = list(self._running.values())
        for handle in handles:
            handle.cancel()
        deadline = time.monotonic() + grace_s
        for handle in handles:
            handle.wait(max(0.0, deadline - time.monotonic()))

    # --- internals --------------------------------------------------------------------------------
    def _refuse_for_quota(self, location: str, spec: dict[str, Any], parent: str) -> None:
        if self.capacity.refuse_create(location, spec, parent):
            raise ApiError(
                capacity_errors.HTTP_TOO_MANY_REQUESTS,
                capacity_errors.STATUS_RESOURCE_EXHAUSTED,
                capacity_errors.quota_message(accelerator_type(spec), location),
            )

    def _on_persistent_resource(self, project: str, location: str, spec: dict[str, Any]) -> bool:
        """Whether the job runs on a persistent resource this emulator has (its capacity is reserved)."""
        ident = spec.get("persistentResourceId")
        if not ident:
            return False
        # persistent_resources.COLLECTION; that module builds on this one, so the name is spelled here.
        name = f"projects/{project}/locations/{location}/persistentResources/{ident}"
        return self.store.get(name) is not None

    def _wait_pending(self, job_name: str, seconds: float) -> bool:
        """Keep the job PENDING `seconds`; False when it was cancelled meanwhile (then CANCELLED) or the
        emulator stops."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self._stop.wait(min(_SUPERVISE_INTERVAL_S, max(0.0, deadline - time.monotonic()))):
                return False
            job = self.store.get(job_name)
            if job is None or job["state"] == "JOB_STATE_CANCELLING":
                self._finish_cancelled_before_start(job_name)
                return False
        return True

    def _wait_for_replicas(self, job_name: str, resource: str, spec: dict[str, Any]) -> bool:
        """Keep the job QUEUED until the persistent resource's free machines take it; False when it was
        cancelled meanwhile, the emulator stops, or the resource was deleted (then FAILED_PRECONDITION)."""
        while True:
            taken = self.replicas.take(job_name, resource, spec)
            if taken == "taken":
                return True
            if taken == "gone":
                message = f"The PersistentResource {resource} was deleted before the job could start on it."
                error = {"code": _CODE_FAILED_PRECONDITION, "message": message}
                self._set_state(job_name, "JOB_STATE_FAILED", unless_cancelling=True, error=error)
                return False
            if self._stop.wait(_SUPERVISE_INTERVAL_S):
                return False
            job = self.store.get(job_name)
            if job is None or job["state"] == "JOB_STATE_CANCELLING":
                self._finish_cancelled_before_start(job_name)
                return False

    def _capacity_before_start(
        self, job_name: str, location: str, spec: dict[str, Any], *, reserved: bool
    ) -> bool:
        """Stockout and Flex-start faults, while the job is PENDING; False when the job must not start.
        Neither touches a job on reserved capacity (an existing persistent resource)."""
        if self.capacity.stockout(job_name, location, spec, reserved=reserved):
            self._set_state(job_name, "JOB_STATE_FAILED", error=capacity_errors.stockout_error(location))
            return False
        flex = self.capacity.flex_wait(job_name, spec, reserved=reserved)
        if flex is None:
            return True
        wait, expires = flex_wait_outcome(flex, spec)
        if not self._wait_pending(job_name, wait):
            return False
        if expires:
            expired = capacity_errors.flex_expired_error(max_wait_s(spec))
            self._set_state(job_name, "JOB_STATE_FAILED", error=expired)
            return False
        return True

    def _check_location(self, location: str) -> None:
        problems = validation.location_problems(location)
        if problems:
            raise ApiError.invalid(problems[0])

    @staticmethod
    def _check_resource(body: dict[str, Any], what: str) -> None:
        problems = validation.resource_problems(body, what)
        if problems:
            raise ApiError.invalid("; ".join(problems[:5]))

    @staticmethod
    def _check_spec(spec: dict[str, Any], where: str) -> None:
        problems = validation.job_spec_problems(spec)
        if problems:
            raise ApiError.invalid(f"{where}: " + "; ".join(problems))

    def _job_dir(self, job_name: str) -> Path:
        return self._work_dir / "jobs" / job_name.rsplit("/", 1)[1]

    def _saved_log_files(self, job_name: str) -> dict[str, Path]:
        folder = self._job_dir(job_name) / "logs"
        return {p.stem: p for p in folder.glob("*.log")} if folder.is_dir() else {}

    def _launch_later(self, job_name: str, project: str, location: str, pipeline: str | None) -> None:
        thread = threading.Thread(
            target=self._launch,
            args=(job_name, project, location, pipeline),
            name="emulator-launch",
            daemon=True,
        )
        thread.start()

    def _set_state(
        self, job_name: str, state: str, *, unless_cancelling: bool = False, **fields: Any
    ) -> Resource:
        def change(job: Resource) -> None:
            if unless_cancelling and job["state"] == "JOB_STATE_CANCELLING":
                return
            job["state"] = state
            if state == "JOB_STATE_RUNNING":
                job.setdefault("startTime", now_rfc3339())
            if state in TERMINAL_STATES:
                job["endTime"] = now_rfc3339()
            if state == "JOB_STATE_SUCCEEDED":
                # Replicas may finish between two supervisor polls; a job that succeeded did run.
                job.setdefault("startTime", job["endTime"])
            job.update(fields)

        job = self.store.update(job_name, change)
        pipeline = self._pipeline_of(job)
        if pipeline:
            mirrored = copy.deepcopy(fields)
            found = self.store.get(pipeline)
            if job["state"] == "JOB_STATE_SUCCEEDED" and self.on_pipeline_success and found:
                mirrored.update(self.on_pipeline_success(found, job))  # before clients read SUCCEEDED

            def mirror(p: Resource) -> None:
                p["state"] = job_to_pipeline_state(job["state"])
                for key in ("startTime", "endTime"):
                    if key in job:
                        p[key] = job[key]
                p.update(mirrored)

            self.store.update(pipeline, mirror)
        return job

    @staticmethod
    def _pipeline_of(job: Resource) -> str | None:
        pipeline = job.get(PIPELINE_KEY)
        return str(pipeline) if pipeline else None

    def _launch(self, job_name: str, project: str, location: str, pipeline: str | None) -> None:
        job = self.store.get(job_name)
        if job is None or is_terminal(job) or job["state"] == "JOB_STATE_CANCELLING":
            self._finish_cancelled_before_start(job_name)
            return
        ident = job["jobSpec"].get("persistentResourceId")
        resource = f"projects/{project}/locations/{location}/persistentResources/{ident}"
        if ident and not self._wait_for_replicas(job_name, resource, job["jobSpec"]):
            return
        self._set_state(job_name, "JOB_STATE_PENDING", unless_cancelling=True)
        if self._stage_inputs is not None:
            try:
                self._stage_inputs()
            except Exception as exc:  # the job still runs; what it reads at /gcs may be stale
                _log.warning("mirroring Cloud Storage for %s failed: %s", job_name, exc)
        reserved = self._on_persistent_resource(project, location, job["jobSpec"])
        if not self._capacity_before_start(job_name, location, job["jobSpec"], reserved=reserved):
            return
        delay = 0.0 if reserved else self.provision_delay_s
        if delay > 0 and not self._wait_pending(job_name, delay):
            return
        job_dir = self._job_dir(job_name)
        trial = job.get(TRIAL_KEY) or {}
        request = LaunchRequest(
            job_id=job_name.rsplit("/", 1)[1],
            spec=job["jobSpec"],
            project=project,
            region=location,
            run_dir=job_dir,
            gcs_root=self._work_dir / "gcs",
            fetch_package=lambda uri: self._fetch_package(uri, job_dir / "packages"),
            trial_id=str(trial.get("id", "")),
            hp_metric_dir=Path(trial["metricDir"]) if trial.get("metricDir") else None,
        )
        try:
            handle = self._runner.start(request)
        except Exception as exc:  # any launch failure is the job's failure, reported in `error`
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            self._set_state(
                job_name,
                "JOB_STATE_FAILED",
                error={"code": _CODE_INTERNAL, "message": f"launch failed: {message}"},
            )
            return
        armed = self.capacity.replica_faults(job_name, job["jobSpec"])
        rank_faults = self.capacity.rank_faults(job_name, job["jobSpec"])
        rank_faults += [aim for aim in (a.aim() for a in armed) if aim is not None]  # after_step
        set_rank_faults = getattr(handle, "set_rank_faults", None)
        if rank_faults and set_rank_faults is not None:  # hang, slow: the ranks' health watchers act
            set_rank_faults(rank_faults)
        delays = self.capacity.start_delays(job_name, job["jobSpec"])
        set_start_delays = getattr(handle, "set_start_delays", None)
        if delays and set_start_delays is not None:  # scattered_start: replicas start late
            set_start_delays(delays)
        with self._lock:
            self._running[job_name] = handle
            if armed:
                # A restarting fault tells the job first, so its runner restarts the replica (§8.1).
                notice = getattr(handle, "stopped_by_platform", None)
                reached = getattr(handle, "reached_step", None)
                self._preemptions[job_name] = Preemptions(armed, stop_notice=notice, reached=reached)
        current = self.store.get(job_name)
        if current is not None and current["state"] == "JOB_STATE_CANCELLING":
            handle.cancel()

    def _preempt(self, job_name: str, handle: RunningJob) -> None:
        """Signal the preemptions due; once a replica is reclaimed the job is stopped (job_fails)."""
        with self._lock:
            preemptions = self._preemptions.get(job_name)
        replica_pids = getattr(handle, "replica_pids", None)
        if preemptions is None or preemptions.stopping or replica_pids is None:
            return
        if preemptions.tick(replica_pids()):
            preemptions.stopping = True
            threading.Thread(target=handle.cancel, name="emulator-preempt", daemon=True).start()

    def _remember_pids(self, job_name: str, handle: RunningJob) -> None:
        """Keep the replicas' pids with the job: a restarted emulator stops what a crash left running."""
        pids = handle.pids()
        job = self.store.get(job_name)
        if job is not None and job.get(PIDS_KEY) != pids:
            self.store.update(job_name, lambda j: j.update({PIDS_KEY: pids}), touch=False)

    def _reap_orphans(self) -> None:
        """Stop replicas of jobs that were running when the previous emulator died (SIGKILL, crash)."""
        for name in self.store.names():
            job = self.store.get(name)
            if job is None or not job.get(PIDS_KEY) or not is_terminal(job):
                continue
            job_id = name.rsplit("/", 1)[1]
            for pid in job[PIDS_KEY]:
                if _runs_job(pid, job_id):
                    with contextlib.suppress(OSError):
                        os.killpg(pid, signal.SIGKILL)
            self.store.update(name, lambda j: j.pop(PIDS_KEY, None), touch=False)

    def _finish_cancelled_before_start(self, job_name: str) -> None:
        job = self.store.get(job_name)
        if job is not None and job["state"] == "JOB_STATE_CANCELLING":
            self._set_state(
                job_name, "JOB_STATE_CANCELLED", error={"code": _CODE_CANCELLED, "message": "CANCELED"}
            )

    def _request_cancel(self, job_name: str) -> None:
        job = self.store.get(job_name)
        if job is None or is_terminal(job):
            return
        with self._lock:
            handle = self._running.get(job_name)
        if handle is None and job["state"] == "JOB_STATE_QUEUED":
            # Not launched yet: the launch thread sees CANCELLING and never starts replicas.
            self._set_state(job_name, "JOB_STATE_CANCELLING")
            return
        self._set_state(job_name, "JOB_STATE_CANCELLING")
        if handle is not None:
            handle.cancel()

    def _publish(self, job_name: str) -> str:
        """The job's output folder into the emulated Cloud Storage, before its final state says it is done;
        what went wrong doing so ("" when nothing did), for the job's error."""
        job = self.store.get(job_name)
        if self._publish_outputs is None or job is None:
            return ""
        try:
            self._publish_outputs(job.get("jobSpec") or {})
        except Exception as exc:  # outputs that cannot be published must not leave the job unfinished
            _log.warning("publishing the outputs of %s failed: %s", job_name, exc)
            reason = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            return f"publishing the job's outputs failed: {reason}"
        return ""

    def _supervise(self) -> None:
        while not self._stop.wait(_SUPERVISE_INTERVAL_S):
            with self._lock:
                running = list(self._running.items())
            for job_name, handle in running:
                try:
                    status = handle.poll()
                except Exception as exc:  # a broken runner must not kill the supervisor
                    status_state, message = "FAILED", f"supervising replicas failed: {exc}"
                else:
                    status_state, message = status.state, status.message
                if status_state in ("PENDING", "RUNNING"):
                    self._preempt(job_name, handle)
                    self._remember_pids(job_name, handle)
                    job = self.store.get(job_name)
                    if status_state == "RUNNING" and job is not None and job["state"] == "JOB_STATE_PENDING":
                        self._set_state(job_name, "JOB_STATE_RUNNING", unless_cancelling=True)
                    continue
                with self._lock:
                    self._running.pop(job_name, None)
                    preemptions = self._preemptions.pop(job_name, None)
                unpublished = self._publish(job_name)
                if preemptions is not None and preemptions.preempted is not None:
                    # Whatever the replicas' exits said: the job failed because its VM was reclaimed.
                    self._set_state(
                        job_name,
                        "JOB_STATE_FAILED",
                        error=capacity_errors.preemption_error(preemptions.preempted),
                    )
                elif status_state == "SUCCEEDED" and not unpublished:
                    self._set_state(job_name, "JOB_STATE_SUCCEEDED")
                elif status_state == "CANCELLED":
                    self._set_state(
                        job_name,
                        "JOB_STATE_CANCELLED",
                        error={"code": _CODE_CANCELLED, "message": "CANCELED"},
                    )
                else:
                    # A job whose outputs are not all there is not a success, whatever its replicas did.
                    if status_state == "SUCCEEDED":
                        message = f"The replicas succeeded, but {unpublished}"
                    elif unpublished:
                        message = f"{message}\n{unpublished}"
                    self._set_state(
                        job_name, "JOB_STATE_FAILED", error={"code": _CODE_INTERNAL, "message": message}
                    )


def _new_resource(parent: str, collection: str, body: Resource, state: str, **fields: Any) -> Resource:
    """A new resource under `parent`: a fresh id, the request's display name and labels, `fields`, `state`."""
    stamp = now_rfc3339()
    return {
        "name": f"{parent}/{collection}/{new_id()}",
        "displayName": body["displayName"],
        **fields,
        "state": state,
        "createTime": stamp,
        "updateTime": stamp,
        "labels": dict(body.get("labels") or {}),
    }


def _runs_job(pid: int, job_id: str) -> bool:
    """Whether process `pid` is still a replica of job `job_id` (pids get reused; its environment tells)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"CLOUD_ML_JOB_ID={job_id}".encode() in environ.split(b"\0")
