"""`local-run` of a tuning template: the HyperparameterTuningJob's trials on this machine, by the same study
and loop the emulator uses (`vertexdist.tuning`), each trial a local job.

`dryrun(template)` packages and renders the template as submit does (the CreateHyperparameterTuningJob body)
and reads it back through the wire reader; `schedule(request)` starts the study in a thread and returns its
run. The run folder keeps `request.json` (the body, secrets masked), `trials/<id>/` (each trial's job
folder: logs, replicas, its cloudml-hypertune files), `gcs/` (gs:// paths: each trial's model is under
`<base output>/<job id>/<trial id>/model/`, the job's own folder as for every job) and, once done,
`summary.json` with every trial and the best one; all for the user only (0600 files, 0700 folders).
`--resume-from RUN` continues an earlier run's folder (`vertexdist.backends.local.resume`). While the study
runs, `progress.json` holds the same as the summary will, rewritten whenever a trial changes, so another
process (`vertexdist ui`) reads the trials as they go: `describe`, `tuning`, `names` and `trial_jobs` read a
run folder, each trial's own job through a `LocalBackend` over `trials/`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertexdist.backends.base import (
    NO_OPTIONS,
    TERMINAL_STATES,
    JobStatus,
    LogQuery,
    LogsPage,
    ReplicaInfo,
    StateChange,
    SubmitOptions,
    TuningStatus,
    with_project,
)
from vertexdist.backends.local.logs import LocalLogs, keep_secrets, kept_secrets, masked
from vertexdist.backends.local.prepare import LocalOptions, job_id_time, package_cache, prepare_run
from vertexdist.backends.local.resume import local_path
from vertexdist.backends.local.run_folders import file_stamp, read_run_json, run_folders
from vertexdist.backends.local.trials import LocalTrialLauncher, trial_default_output_uri
from vertexdist.backends.outputs import FolderOutputs, require_output_uri
from vertexdist.errors import UsageError
from vertexdist.local import gcs_mount
from vertexdist.local.environment import JobContext
from vertexdist.private_files import write_private_json
from vertexdist.render import mask_secrets, secret_values, with_job_folder
from vertexdist.spec.models import JobTemplate
from vertexdist.tuning.driver import TuningRun
from vertexdist.tuning.study import Study
from vertexdist.tuning.trials import trial_output_uri
from vertexdist.wire.study import (
    StudySpec,
    TuningJob,
    TuningSpecError,
    normalize_tuning_job,
    parse_study_spec,
    parse_tuning_job,
)
from vertexdist.wire.timestamps import format_ns
from vertexdist.wire.trials import trial_from_json, trial_to_json

if TYPE_CHECKING:
    from vertexdist.backends.local.backend import LocalBackend

SUMMARY = "summary.json"
PROGRESS = "progress.json"
REQUEST = "request.json"


class UnknownTuningRun(UsageError):
    """No tuning run of that id has a run folder here."""


@dataclass(frozen=True)
class LocalTuningRequest:
    job_id: str
    display_name: str
    run_dir: Path
    request: dict[str, Any]  # the CreateHyperparameterTuningJob body, as submit sends it
    job: TuningJob  # the same body, read back through the wire reader
    ctx: JobContext
    sdists: dict[str, Path]
    cache_dir: Path


def prepare_tuning_request(
    t: JobTemplate, options: LocalOptions, *, scratch: Path | None = None, resume_from: str | None = None
) -> LocalTuningRequest:
    from vertexdist.packaging import build_sdist, package_uri
    from vertexdist.render.tuning import render_tuning_request

    if options.docker:
        raise UsageError(
            "--docker does not run tuning templates yet", hint="drop --docker: the trials run on the host"
        )
    t = with_project(t)
    run = prepare_run(t, options, scratch=scratch, resume_from=resume_from)
    sdist = build_sdist(t.trainer, scratch or run.run_dir / "package")
    uri = package_uri(t.staging_bucket, sdist)
    rendered = render_tuning_request(t, package_uri=uri, resume_from=run.resume_uri)
    request = with_job_folder(rendered, run.job_id)
    job = parse_tuning_job(normalize_tuning_job(request["hyperparameterTuningJob"]))
    return LocalTuningRequest(
        job_id=run.job_id,
        display_name=t.display_name,
        run_dir=run.run_dir,
        request=request,
        job=job,
        ctx=run.ctx,
        sdists={uri: sdist.path},
        cache_dir=package_cache(options),
    )


def model_dir(request: LocalTuningRequest, trial_id: str) -> Path | None:
    """The local folder of a trial's AIP_MODEL_DIR: under the job's output folder, or the run's default one
    when the job names none (`trials.trial_context`)."""
    uri = trial_output_uri(request.job.trial_job_spec, trial_id) or trial_default_output_uri(
        request.ctx, trial_id
    )
    return local_path(f"{uri}/model", Path(request.ctx.gcs_root)) if uri else None


def summary_of(request: LocalTuningRequest, run: TuningRun, launcher: LocalTrialLauncher) -> dict[str, Any]:
    """What a finished tuning run leaves in its `summary.json` (and `local-run --json` prints last)."""
    snapshot = run.snapshot()
    metric = run.study.objective.id
    trials = []
    for trial in snapshot.trials:
        folder = launcher.trial_dir(trial.id)
        trials.append(
            {
                **trial_to_json(trial),
                "stoppedEarly": trial.id in snapshot.stopped_early,
                "runDir": str(folder),
                "logs": str(folder / "logs"),
                "modelDir": str(model_dir(request, trial.id) or ""),
            }
        )
    best = next((t for t in trials if t["id"] == snapshot.best), None)
    best_trial = next((t for t in snapshot.trials if t.id == snapshot.best), None)
    best_value = (
        best_trial.final_measurement.values.get(metric)
        if best_trial and best_trial.final_measurement
        else None
    )
    return {
        "job_id": request.job_id,
        "display_name": request.display_name,
        "state": f"JOB_STATE_{snapshot.outcome}",
        "error": snapshot.message or None,
        "run_dir": str(request.run_dir),
        "metric": metric,
        "best": None
        if best is None
        else {
            "trial": best["id"],
            "parameters": {p["parameterId"]: p["value"] for p in best["parameters"]},
            metric: best_value,
            "modelDir": best["modelDir"],
        },
        "trials": trials,
    }


@dataclass
class _Started:
    request: LocalTuningRequest
    run: TuningRun
    thread: threading.Thread
    launcher: LocalTrialLauncher


class LocalTuningBackend:
    """Runs tuning templates here; `seed` fixes random and bayesian suggestions (None: a fresh draw).

    A run is addressed by its job id: one started here, or a run folder under the runs folder (its
    `request.json`, and `summary.json` once done). Its logs are its trials' replica logs, each named
    `<trial id>/<replica>` (`LogQuery.trial` keeps one trial's)."""

    def __init__(
        self,
        options: LocalOptions | None = None,
        *,
        grace_s: float = 5.0,
        timeout_s: float | None = None,
        seed: int | None = None,
        poll_s: float = 0.2,
    ) -> None:
        self.options = options or LocalOptions()
        self._grace_s = grace_s
        self._timeout_s = timeout_s
        self._seed = seed
        self._poll_s = poll_s
        self._runs: dict[str, _Started] = {}
        self._lock = threading.Lock()
        self._logs = LocalLogs()

    def dryrun(self, template: JobTemplate, options: SubmitOptions = NO_OPTIONS) -> LocalTuningRequest:
        if template.tuning is None:
            raise UsageError(f"{template.display_name} has no `tuning:` section")
        if template.build is not None:
            # Like `submit --emulator`: the trainer runs as a Python package here.
            template = template.model_copy(update={"build": None})
        return prepare_tuning_request(
            template, self.options, scratch=options.scratch, resume_from=options.resume_from
        )

    def schedule(self, request: LocalTuningRequest, options: SubmitOptions = NO_OPTIONS) -> str:
        """Start the study in a thread and return the job id; the thread writes `summary.json` at its end."""
        write_private_json(request.run_dir / "request.json", mask_secrets(request.request))
        keep_secrets(request.run_dir, secret_values(dict(request.job.trial_job_spec)))
        launcher = LocalTrialLauncher(
            request.job.trial_job_spec,
            request.ctx,
            run_dir=request.run_dir,
            sdists=request.sdists,
            cache_dir=request.cache_dir,
            parallel=request.job.parallel_trial_count,
            grace_s=self._grace_s,
            timeout_s=self._timeout_s,
        )
        progress_lock = threading.Lock()

        def write_progress(run: TuningRun) -> None:
            with progress_lock:
                write_private_json(request.run_dir / PROGRESS, summary_of(request, run, launcher))

        run = TuningRun(
            Study(request.job, seed=self._seed), launcher, poll_s=self._poll_s, on_change=write_progress
        )

        def work() -> None:
            try:
                run.run()
            finally:
                write_private_json(request.run_dir / SUMMARY, summary_of(request, run, launcher))

        thread = threading.Thread(target=work, name="vertexdist-local-tuning", daemon=True)
        with self._lock:
            self._runs[request.job_id] = _Started(request, run, thread, launcher)
        thread.start()
        return request.job_id

    @staticmethod
    def gcs_warning() -> str | None:
        """Why the trials' replicas cannot see the job's Cloud Storage at /gcs here (said once, as the run
        starts: each trial is a job of its own, and a trial's touch of /gcs fails with it), or None."""
        problem = gcs_mount.problem()
        return None if problem is None else f"warning: {problem}"

    def _started(self, name: str) -> _Started | None:
        with self._lock:
            return self._runs.get(name)

    def run(self, name: str) -> tuple[TuningRun, threading.Thread]:
        """The study loop of a run started here, and the thread it runs in (views follow the one, join the
        other)."""
        found = self._started(name)
        if found is None:
            raise UsageError(f"no local tuning job {name} was started here")
        return found.run, found.thread

    def run_dir(self, name: str) -> Path:
        found = self._started(name)
        return found.request.run_dir if found is not None else (self.options.runs_dir / name).resolve()

    def owns(self, name: str) -> bool:
        """Whether `name` is a tuning run: started here, or a run folder with a tuning request."""
        return self._started(name) is not None or (self.run_dir(name) / "request.json").is_file()

    # --- jobs -------------------------------------------------------------------------------------
    def describe(self, name: str) -> JobStatus:
        found = self._started(name)
        if found is not None:
            snapshot = found.run.snapshot()
            return JobStatus(
                name=name,
                display_name=found.request.display_name,
                # Done once the loop has stopped every trial and written the summary.
                state="RUNNING" if found.thread.is_alive() else snapshot.outcome,
                error=snapshot.message or None,
                spec=_trial_spec(mask_secrets(found.request.request)),
                location=found.request.ctx.region,
            )
        request, summary = self._state_file(name)
        job = request.get("hyperparameterTuningJob") or {}
        state = str(summary.get("state") or "JOB_STATE_PENDING").removeprefix("JOB_STATE_")
        trials = [t for t in summary.get("trials") or [] if isinstance(t, dict)]
        created = job_id_time(name)
        starts = [str(t["startTime"]) for t in trials if t.get("startTime")]
        ends = [str(t["endTime"]) for t in trials if t.get("endTime")]
        # Started by a local-run in another process: done once it has written the summary.
        done = state in TERMINAL_STATES and (self.run_dir(name) / SUMMARY).is_file()
        return JobStatus(
            name=name,
            display_name=str(summary.get("display_name") or job.get("displayName") or ""),
            state=state if done or state not in TERMINAL_STATES else "RUNNING",
            create_time=format_ns(int(created * 1e9)) if created is not None else None,
            start_time=min(starts) if starts else None,
            end_time=(max(ends) if ends else None) if done else None,
            error=summary.get("error") or None,
            spec=_trial_spec(request),
            location=str(request.get("parent", "")).rpartition("/locations/")[2] or None,
        )

    def tuning(self, name: str) -> TuningStatus:
        """The run's status, study and trials (as `vertexdist trials` shows a Vertex tuning job's)."""
        found = self._started(name)
        if found is not None:
            snapshot = found.run.snapshot()
            return TuningStatus(self.describe(name), found.request.job.study, list(snapshot.trials))
        request, summary = self._state_file(name)
        try:
            body = normalize_tuning_job(request.get("hyperparameterTuningJob") or {})
            study: StudySpec | None = parse_study_spec(body.get("studySpec"))
        except (TuningSpecError, ValueError):
            study = None
        trials = [trial_from_json(t) for t in summary.get("trials") or [] if isinstance(t, dict)]
        return TuningStatus(status=self.describe(name), study=study, trials=trials)

    def replicas(self, name: str) -> list[ReplicaInfo]:
        """None of its own: each trial is a job with its replicas (`trial_jobs`)."""
        self.describe(name)
        return []

    def timeline(self, name: str) -> list[StateChange]:
        """Its creation, each trial's start and end, its end."""
        return self.tuning(name).timeline()

    def names(self) -> list[str]:
        """Ids of the tuning runs under the runs folder (those with a request.json), newest first."""
        return run_folders(self.options.runs_dir, REQUEST)

    def version(self, name: str) -> tuple[int, ...]:
        """What changes whenever `tuning(name)` would: a view may keep what it made of the run meanwhile."""
        return file_stamp(self.options.runs_dir / name, (SUMMARY, PROGRESS))

    def _state_file(self, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(request.json's body, the summary or, while the study runs, its progress)."""
        folder = self.run_dir(name)
        request = read_run_json(folder / REQUEST)
        if not request:
            raise UnknownTuningRun(f"no tuning run {name} in {self.options.runs_dir}")
        return request, read_run_json(folder / SUMMARY) or read_run_json(folder / PROGRESS)

    def trial_jobs(self, name: str) -> LocalBackend:
        """The run's trials as local jobs (a trial's id names its job): replicas, logs, outputs."""
        # By name (the registry), not by import: the local backend is the one that holds this part.
        from vertexdist.backends import create_backend

        return create_backend("local", LocalOptions(runs_dir=self.run_dir(name) / "trials"))

    def list(self, limit: int = 50) -> list[JobStatus]:
        """Runs started here, then earlier tuning run folders, newest first."""
        with self._lock:
            names = list(self._runs)
        runs = self.options.runs_dir
        if runs.is_dir():
            done = [
                p.name for p in runs.iterdir() if (p / "request.json").is_file() and (p / SUMMARY).is_file()
            ]
            names += sorted(done, reverse=True)
        return [self.describe(name) for name in list(dict.fromkeys(names))[:limit]]

    def cancel(self, name: str) -> None:
        """Stop every trial; returns at once (the run's thread waits for them, then writes the summary)."""
        self.run(name)[0].cancel()

    def logs(self, name: str, cursor: object | None = None, query: LogQuery | None = None) -> LogsPage:
        """The trials' replica log lines after `cursor` in time order, each named `<trial>/<replica>`."""
        query = query or LogQuery()
        found = self._started(name)
        if query.trial is not None and cursor is None and query.trial not in trial_ids(self.run_dir(name)):
            known = ", ".join(trial_ids(self.run_dir(name))) or "none yet"
            raise UsageError(
                f"{name} has no trial {query.trial}; its trials: {known}",
                hint=f"its trials and their states: vertexdist trials {name}",
            )
        trials = self.run_dir(name) / "trials"
        files: dict[str, Path] = {}
        if trials.is_dir():
            for folder in sorted(trials.iterdir()):
                if query.trial is not None and folder.name != query.trial:
                    continue
                for path in (folder / "logs").glob("workerpool*.log"):
                    if query.replica is None or path.stem == query.replica:
                        files[f"{folder.name}/{path.stem}"] = path
        final = not found.thread.is_alive() if found is not None else (self.run_dir(name) / SUMMARY).is_file()
        kept = LogQuery(severity=query.severity, since=query.since)
        page = self._logs.page(files, cursor, kept, final=final)
        return masked(page, kept_secrets(self.run_dir(name)))

    def outputs(self, name: str) -> FolderOutputs:
        """The job's output folder (each trial's under it) in its run folder's gs:// namespace."""
        return FolderOutputs(require_output_uri(name, self.describe(name).spec), self.run_dir(name) / "gcs")


def trial_ids(run_dir: Path) -> list[str]:
    """The ids of a tuning run's trials so far (each has a folder under the run folder's `trials/`)."""
    trials = run_dir / "trials"
    found = [p.name for p in trials.iterdir() if p.is_dir()] if trials.is_dir() else []
    return sorted(found, key=lambda t: (len(t), t))


def _trial_spec(body: dict[str, Any]) -> dict[str, Any]:
    """The trials' CustomJobSpec in a CreateHyperparameterTuningJob body."""
    return dict((body.get("hyperparameterTuningJob") or {}).get("trialJobSpec") or {})
