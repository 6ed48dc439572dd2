"""The emulated JobService HyperparameterTuningJob methods: create, get, list, cancel, delete; and the study
behind each job, run by the shared tuning loop (`vertexdist.tuning.driver`) with its trials as CustomJobs.

Follows https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.hyperparameterTuningJobs:
a job goes QUEUED -> PENDING -> RUNNING (its first trial started) -> SUCCEEDED | FAILED | CANCELLED (via
CANCELLING). Each trial is a CustomJob named in `trials[].customJob`, run like any other (its replicas get
CLOUD_ML_TRIAL_ID, CLUSTER_SPEC task.trial and a cloudml-hypertune metric file, read for its measurements).
Jobs are persisted with the others; one that was running when the emulator stopped is FAILED on restart.
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any

from vertexdist.emulator.store import JobStore, Resource, is_terminal, new_id
from vertexdist.emulator.vertex import validation
from vertexdist.emulator.vertex.jobs import ApiError, EmulatorService, parse_parent
from vertexdist.local.environment import hp_metric_file
from vertexdist.tuning.driver import TrialEnd, TuningRun, metric_file_text
from vertexdist.tuning.study import Study, TrialRecord
from vertexdist.tuning.trials import trial_job_spec
from vertexdist.wire.proto_json import now_rfc3339
from vertexdist.wire.study import normalize_tuning_job, parse_tuning_job
from vertexdist.wire.trials import trial_from_json, trial_to_json

COLLECTION = "hyperparameterTuningJobs"
CHIEF = "workerpool0-0"
_CODE_CANCELLED = 1
_CODE_INVALID_ARGUMENT = 3
_STOP_GRACE_S = 30.0
_INTERRUPTED_TRIAL = "the emulator stopped while this trial ran"


class EmulatorTrial:
    """One trial's CustomJob, as the tuning loop sees it."""

    def __init__(self, jobs: EmulatorService, name: str, metric_file: Path) -> None:
        self._jobs = jobs
        self.custom_job: str | None = name
        self._metric_file = metric_file

    def poll(self) -> TrialEnd | None:
        job = self._jobs.store.get(str(self.custom_job))
        if job is None:
            return TrialEnd(False, "the trial's CustomJob is gone")
        state = job["state"]
        if state == "JOB_STATE_SUCCEEDED":
            return TrialEnd(True)
        if state in ("JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"):
            return TrialEnd(False, (job.get("error") or {}).get("message") or state)
        return None

    def metrics_text(self) -> str:
        return metric_file_text(self._metric_file)

    def stop(self) -> None:
        with contextlib.suppress(ApiError):  # it may have ended meanwhile
            self._jobs.cancel(str(self.custom_job))

    def wait(self, timeout: float) -> bool:
        found = self._jobs.store.wait_until(str(self.custom_job), is_terminal, timeout)
        return found is None or is_terminal(found)


class _TrialLauncher:
    def __init__(self, service: TuningService, job_name: str, resource: Resource) -> None:
        self._service = service
        self._job_name = job_name
        self._parent = job_name.rsplit(f"/{COLLECTION}/", 1)[0]
        self._resource = resource

    def start(self, trial: TrialRecord) -> EmulatorTrial:
        metric_dir = self._service.trial_dir(self._job_name, trial.id)
        body = {
            "displayName": f"{self._resource['displayName']}-trial-{trial.id}",
            "jobSpec": trial_job_spec(self._resource["trialJobSpec"], trial.id, trial.args),
            "labels": self._resource.get("labels") or {},
        }
        created = self._service.jobs.create_custom_job(
            self._parent,
            body,
            trial={"id": trial.id, "metricDir": str(metric_dir), "tuningJob": self._job_name},
        )
        return EmulatorTrial(
            self._service.jobs, created["name"], Path(hp_metric_file(str(metric_dir), CHIEF))
        )


def seed_of(job_name: str) -> int:
    """The search seed of a job: its id, so a job's suggestions do not change with when it runs."""
    ident = job_name.rsplit("/", 1)[-1]
    return int(ident) % (2**31) if ident.isdigit() else sum(map(ord, ident))


class TuningService:
    def __init__(self, jobs: EmulatorService, *, work_dir: Path, poll_s: float = 0.1) -> None:
        self.jobs = jobs
        self.store: JobStore = jobs.store
        self._work_dir = Path(work_dir)
        self._poll_s = poll_s
        self._runs: dict[str, tuple[TuningRun | None, threading.Thread]] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._settle_interrupted()

    def trial_dir(self, job_name: str, trial_id: str) -> Path:
        return self._work_dir / "tuning" / job_name.rsplit("/", 1)[-1] / "trials" / trial_id

    # --- JobService -------------------------------------------------------------------------------
    def create(self, parent: str, body: dict[str, Any]) -> Resource:
        _project, location = parse_parent(parent)
        problems = validation.location_problems(location)
        if problems:
            raise ApiError.invalid(problems[0])
        if not body.get("displayName") and not body.get("display_name"):
            raise ApiError.invalid("hyperparameterTuningJob.displayName is required")
        try:
            normalized = normalize_tuning_job(body)
            job = parse_tuning_job(normalized)
        except ValueError as exc:
            raise ApiError.invalid(f"hyperparameterTuningJob.{exc}") from None
        resource_problems = validation.resource_problems(normalized, "hyperparameterTuningJob")
        if resource_problems:
            raise ApiError.invalid("; ".join(resource_problems[:5]))
        spec_problems = validation.job_spec_problems(dict(job.trial_job_spec))
        if spec_problems:
            raise ApiError.invalid("hyperparameterTuningJob.trialJobSpec: " + "; ".join(spec_problems))
        if job.parallel_trial_count > job.max_trial_count:
            raise ApiError.invalid(
                f"hyperparameterTuningJob.parallelTrialCount ({job.parallel_trial_count}) must not exceed"
                f" maxTrialCount ({job.max_trial_count})"
            )
        at_once = validation.local_size_problems(dict(job.trial_job_spec), at_once=job.parallel_trial_count)
        if at_once:
            raise ApiError.invalid("hyperparameterTuningJob.parallelTrialCount: " + at_once[0])
        stamp = now_rfc3339()
        resource: Resource = {
            "name": f"{parent}/{COLLECTION}/{new_id()}",
            "displayName": normalized["displayName"],
            "studySpec": normalized["studySpec"],
            "maxTrialCount": job.max_trial_count,
            "parallelTrialCount": job.parallel_trial_count,
            "trialJobSpec": normalized["trialJobSpec"],
            "state": "JOB_STATE_QUEUED",
            "createTime": stamp,
            "updateTime": stamp,
            "labels": dict(normalized.get("labels") or {}),
        }
        if job.max_failed_trial_count:
            resource["maxFailedTrialCount"] = job.max_failed_trial_count
        if normalized.get("encryptionSpec"):
            resource["encryptionSpec"] = normalized["encryptionSpec"]
        created = self.store.insert(resource)
        thread = threading.Thread(
            target=self._run, args=(created["name"],), name="emulator-tuning", daemon=True
        )
        with self._lock:
            self._runs[created["name"]] = (None, thread)
        thread.start()
        return created

    def cancel(self, name: str) -> None:
        found = self._found(name)
        if is_terminal(found):
            raise ApiError(
                400, "FAILED_PRECONDITION", f"Cannot cancel {name}: it is already in state {found['state']}."
            )
        self.store.update(name, lambda j: j.update(state="JOB_STATE_CANCELLING"))
        with self._lock:
            run = self._runs.get(name, (None, None))[0]
        if run is not None:
            run.cancel()

    def close(self, grace_s: float = _STOP_GRACE_S) -> None:
        """Stop every study's loop and its trials; running jobs stay as they are in the store (a restart
        marks them FAILED, as for CustomJobs)."""
        self._closing.set()
        with self._lock:
            runs = list(self._runs.values())
        for run, _thread in runs:
            if run is not None:
                run.cancel()
        for _run, thread in runs:
            thread.join(timeout=grace_s)

    # --- the study ---------------------------------------------------------------------------------
    def _found(self, name: str) -> Resource:
        found = self.store.get(name)
        if found is None:
            raise ApiError.not_found(name)
        return found

    def _run(self, name: str) -> None:
        resource = self.store.get(name)
        if resource is None:
            return
        if resource["state"] == "JOB_STATE_CANCELLING":
            self._finish(name, "CANCELLED", "CANCELED", [])
            return
        self._set_state(name, "JOB_STATE_PENDING")
        job = parse_tuning_job(resource)
        study = Study(job, seed=seed_of(name))
        run = TuningRun(
            study,
            _TrialLauncher(self, name, resource),
            poll_s=self._poll_s,
            on_change=lambda r: self._persist(name, r),
        )
        with self._lock:
            self._runs[name] = (run, self._runs[name][1])
        # A cancel that came before the run was registered set only the state; it still counts.
        if (self.store.get(name) or {}).get("state") == "JOB_STATE_CANCELLING" or self._closing.is_set():
            run.cancel()
        try:
            outcome, message = run.run()
        except Exception as exc:  # the study's own failure is the job's failure, reported in `error`
            outcome, message = "FAILED", f"the tuning loop failed: {type(exc).__name__}: {exc}"
        if not self._closing.is_set():
            self._finish(name, outcome, message, [trial_to_json(t) for t in study.wire_trials()])
        with self._lock:
            self._runs.pop(name, None)

    def _persist(self, name: str, run: TuningRun) -> None:
        if self._closing.is_set():
            return
        trials = [trial_to_json(t) for t in run.snapshot().trials]

        def change(job: Resource) -> None:
            job["trials"] = trials
            if job["state"] in ("JOB_STATE_QUEUED", "JOB_STATE_PENDING") and trials:
                job["state"] = "JOB_STATE_RUNNING"
                job.setdefault("startTime", now_rfc3339())

        self.store.update(name, change)

    def _set_state(self, name: str, state: str) -> None:
        def change(job: Resource) -> None:
            if job["state"] != "JOB_STATE_CANCELLING":
                job["state"] = state

        self.store.update(name, change)

    def _finish(self, name: str, outcome: str, message: str, trials: list[dict[str, Any]]) -> None:
        def change(job: Resource) -> None:
            stamp = now_rfc3339()
            job["state"] = f"JOB_STATE_{outcome}"
            job["trials"] = trials
            job["endTime"] = stamp
            if outcome == "SUCCEEDED":
                job.setdefault("startTime", stamp)
            if outcome == "CANCELLED":
                job["error"] = {"code": _CODE_CANCELLED, "message": "CANCELED"}
            elif outcome == "FAILED":
                job["error"] = {"code": _CODE_INVALID_ARGUMENT, "message": message}

        self.store.update(name, change)

    def _settle_interrupted(self) -> None:
        """Trials of jobs a previous emulator left unfinished end INFEASIBLE, saying why."""
        for name in self.store.names():
            if f"/{COLLECTION}/" not in name:
                continue
            job = self.store.get(name)
            if job is None or not is_terminal(job):
                continue
            trials = job.get("trials") or []
            if not any(trial_from_json(t).state in ("ACTIVE", "STOPPING", "REQUESTED") for t in trials):
                continue

            def change(j: Resource) -> None:
                for t in j.get("trials") or []:
                    if t.get("state") in ("ACTIVE", "STOPPING", "REQUESTED"):
                        t.update(
                            state="INFEASIBLE", infeasibleReason=_INTERRUPTED_TRIAL, endTime=j["endTime"]
                        )

            self.store.update(name, change, touch=False)
