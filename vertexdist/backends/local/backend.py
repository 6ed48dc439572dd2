"""The local backend: a template's job on this machine, behind the same interface as the Vertex backend.

`dryrun(template)` packages and renders the template as submit does and returns the `LocalRequest` with its
launch plan (what `local-run --plan` prints); `schedule(request)` runs exactly that plan and returns the
job id. `describe`, `list`, `cancel` and `logs` address a job by that id: one started here, or the run
folder an earlier `local-run` left (its `summary.json`). A tuning template's request is a
`LocalTuningRequest`, run (and described, listed, cancelled, read) by `backends.local.tuning`: its trials
are local jobs of their own. Each run folder keeps `job.json` (the CustomJobSpec), `plan.json`,
`summary.json`, `logs/` and the replicas' working folders, all for the user only (files 0600, folders
0700). `job.json` and `plan.json` mask secret-looking env values as every printout does. The values
themselves are kept in `secrets.json` (0600, only when the job has any), for one use: masking them in the
log text `logs` returns and the error `describe` shows, as local-run masks them live. That file says no more
than the replicas' own logs beside it may (whatever a replica prints of its secret lands there in clear), and
the folder is the user's alone (docs/commands/local-run.md, "Secrets in the run folder").
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertexdist.backends.base import (
    NO_OPTIONS,
    TERMINAL_STATES,
    JobList,
    JobResult,
    JobStatus,
    LogQuery,
    LogsPage,
    ReplicaInfo,
    StateChange,
    SubmitOptions,
    TuningStatus,
)
from vertexdist.backends.local.experiment_record import EXPERIMENT_RUN, experiment_record
from vertexdist.backends.local.logs import LocalLogs, keep_secrets, kept_secrets, masked
from vertexdist.backends.local.prepare import LocalOptions, job_id_time, prepare_request
from vertexdist.backends.local.resume import local_path
from vertexdist.backends.local.run_folders import file_stamp, read_run_json, run_folders
from vertexdist.backends.outputs import FolderOutputs, require_output_uri
from vertexdist.errors import UsageError, VertexdistError
from vertexdist.local.events import EVENTS, RecordedEvent, read_events
from vertexdist.local.request import LocalRequest
from vertexdist.local.runner import LocalJob, Spawner
from vertexdist.private_files import make_private_dir, write_private_json
from vertexdist.render import mask_secrets, mask_text, secret_values
from vertexdist.spec.models import JobTemplate
from vertexdist.wire.timestamps import format_ns

if TYPE_CHECKING:
    from vertexdist.backends.local.tuning import LocalTuningBackend, LocalTuningRequest

SUMMARY = "summary.json"
RUN = "run.json"  # what the job is called and where it would run on Vertex, written when it starts


def _rfc3339(seconds: float | None) -> str | None:
    return None if seconds is None else format_ns(int(seconds * 1e9))


def _short(state: str) -> str:
    return state.removeprefix("JOB_STATE_")


def _times(name: str, events: list[RecordedEvent], summary: dict[str, Any]) -> tuple[float | None, ...]:
    """(created, started, ended) in seconds since the epoch: from the recorded events, else from the job id
    (its UTC start second) and the summary's elapsed time (run folders from before events were kept)."""
    created = job_id_time(name)  # the second the job was made: it is PENDING while its packages install
    if created is None and events:
        created = events[0].time
    started = next((e.time for e in events if _short(e.job_state) == "RUNNING"), None)
    ended = None
    if events and _short(events[-1].job_state) in TERMINAL_STATES:
        ended = events[-1].time
    elif summary and created is not None and isinstance(summary.get("elapsed_s"), int | float):
        ended = created + float(summary["elapsed_s"])
    return created, started if started is not None else (created if summary else None), ended


def _about_from_plan(run_dir: Path) -> dict[str, Any]:
    """A run folder from before run.json: its region from the plan (what its replicas got as
    CLOUD_ML_REGION)."""
    replicas = read_run_json(run_dir / "plan.json").get("replicas") or [{}]
    env = replicas[0].get("env") if isinstance(replicas[0], dict) else None
    region = env.get("CLOUD_ML_REGION") if isinstance(env, dict) else None
    return {"location": region} if region else {}


def _machines(spec: dict[str, Any]) -> dict[int, str]:
    pools = spec.get("workerPoolSpecs")
    if not isinstance(pools, list):
        return {}
    return {
        index: str(((pool or {}).get("machineSpec") or {}).get("machineType") or "")
        for index, pool in enumerate(pools)
        if isinstance(pool, dict)
    }


def _pool_of(replica: str) -> int:
    head = replica.removeprefix("workerpool").split("-", 1)[0]
    return int(head) if head.isdigit() else 0


def summary_of(
    job_id: str,
    display_name: str,
    run_dir: Path,
    result: JobResult,
    *,
    output_dir: str | None = None,
    output_path: Path | None = None,
) -> dict[str, Any]:
    """What a finished job leaves in its `summary.json` (and `local-run --json` prints last)."""
    error = (
        None if result.error is None else {"message": result.error.message, "replica": result.error.replica}
    )
    return {
        "job_id": job_id,
        "display_name": display_name,
        "state": result.state.value,
        "error": error,
        "restarts": result.restarts,
        "elapsed_s": round(result.elapsed_s, 3),
        "run_dir": str(run_dir),
        "output_dir": output_dir,
        "output_path": None if output_path is None else str(output_path),
        "replicas": [
            {
                "name": r.name,
                "state": r.state.value,
                "pid": r.pid,
                "exit_code": r.exit_code,
                "restarts": r.restarts,  # restarted on its own (Vertex's restart rules: local.exits)
                "log": str(r.log_path),
            }
            for r in result.replicas
        ],
    }


def _warm_spawner(socket: Path | None = None) -> Spawner:
    """The shared warm pool's spawner (started on first use), or that of the pool at `socket`, which its
    owner keeps (a managed run's controller: `jobs.attempt_pool`)."""
    from vertexdist.local.warm_pool import WarmSpawner

    return WarmSpawner() if socket is None else WarmSpawner(socket, start=False)


class UnknownLocalJob(VertexdistError):
    """No job of that id runs here, and no run folder holds one."""


class LocalBackend:
    def __init__(
        self,
        options: LocalOptions | None = None,
        *,
        grace_s: float = 5.0,
        timeout_s: float | None = None,
        seed: int | None = None,
    ) -> None:
        self.options = options or LocalOptions()
        self._grace_s = grace_s
        self._timeout_s = timeout_s
        self._seed = seed
        self._jobs: dict[str, tuple[LocalRequest, LocalJob]] = {}
        self._lock = threading.Lock()
        self._logs = LocalLogs()
        self._tuning_backend: LocalTuningBackend | None = None

    @property
    def tuning(self) -> LocalTuningBackend:
        """The part that runs tuning templates (`seed` fixes their random and bayesian suggestions)."""
        if self._tuning_backend is None:
            from vertexdist.backends.local.tuning import LocalTuningBackend

            self._tuning_backend = LocalTuningBackend(
                self.options, grace_s=self._grace_s, timeout_s=self._timeout_s, seed=self._seed
            )
        return self._tuning_backend

    def _is_tuning(self, name: str) -> bool:
        with self._lock:
            if name in self._jobs:
                return False
        return self.tuning.owns(name)

    # --- submit -----------------------------------------------------------------------------------
    def dryrun(
        self, template: JobTemplate, options: SubmitOptions = NO_OPTIONS
    ) -> LocalRequest | LocalTuningRequest:
        """The template's LocalRequest (a LocalTuningRequest for a tuning template); with `options.scratch`
        nothing is made but its sdist there (a plan only); `options.resume_from` is an earlier run (id or
        folder) whose output folder the job continues."""
        if template.tuning is not None:
            return self.tuning.dryrun(template, options)
        return prepare_request(
            template, self.options, scratch=options.scratch, resume_from=options.resume_from
        )

    def schedule(
        self, request: LocalRequest | LocalTuningRequest, options: SubmitOptions = NO_OPTIONS
    ) -> str:
        """Start the request's job and return its id; `options.on_event` gets each state change."""
        if not isinstance(request, LocalRequest):
            return self.tuning.schedule(request, options)
        from vertexdist.local.job_services import JobServices
        from vertexdist.local.launch import identity_of, schedule

        run_dir = make_private_dir(request.run_dir)
        write_private_json(run_dir / "job.json", mask_secrets(dict(request.job.raw)))
        keep_secrets(run_dir, secret_values(dict(request.job.raw)))
        write_private_json(run_dir / "plan.json", request.to_dict())
        write_private_json(
            run_dir / RUN,
            {"job_id": request.job_id, "display_name": request.display_name, "location": request.ctx.region},
        )

        def write_summary() -> None:
            self._write_summary(request, self.job(request.job_id))

        job = schedule(
            request,
            on_event=options.on_event,
            on_finish=write_summary,
            grace_s=self._grace_s,
            timeout_s=self._timeout_s,
            # As on Vertex, the job's code finds its service account on a metadata server (issue 17).
            services=JobServices(identity=identity_of(request)),
            spawner=(
                _warm_spawner(None if self.options.warm else self.options.warm_socket)
                if self.options.warm or self.options.warm_socket is not None
                else None
            ),
        )
        with self._lock:
            self._jobs[request.job_id] = (request, job)
        return str(request.job_id)

    def job(self, name: str) -> LocalJob:
        """The running (or finished) job this backend started, for views that follow it."""
        with self._lock:
            found = self._jobs.get(name)
        if found is None:
            raise UnknownLocalJob(f"no local job {name} was started here")
        return found[1]

    def secret_values(self, name: str) -> tuple[str, ...]:
        """The secret env values of a job started here or of a run folder, so views can mask them in text."""
        with self._lock:
            found = self._jobs.get(name)
        if found is not None:
            return secret_values(dict(found[0].job.raw))
        return kept_secrets(self.run_dir(name))

    def summary(self, name: str) -> dict[str, Any]:
        """The finished job's summary (what its run folder's summary.json holds)."""
        path = self.run_dir(name) / SUMMARY
        with self._lock:
            found = self._jobs.get(name)
        if found is not None and found[1].done and not path.is_file():
            # It ended before `schedule` had recorded it (a package install that failed at once), so its
            # own summary could not be written then: write it now.
            self._write_summary(found[0], found[1])
        try:
            return dict(json.loads(path.read_text()))
        except (OSError, ValueError):
            still = found is None or not found[1].done
            raise UnknownLocalJob(
                f"local job {name} has no summary in {path}",
                hint="it may still be running" if still else f"its logs: {path.parent / 'logs'}",
            ) from None

    def _write_summary(self, request: LocalRequest, job: LocalJob) -> None:
        output_dir = request.job.output_uri_prefix
        output_path = local_path(output_dir, Path(request.ctx.gcs_root)) if output_dir else None
        summary = summary_of(
            request.job_id,
            request.display_name,
            request.run_dir,
            job.result(),
            output_dir=output_dir,
            output_path=output_path,
        )
        write_private_json(request.run_dir / SUMMARY, summary)
        record = experiment_record(request.job.raw, output_path)  # template `experiment:`
        if record is not None:
            write_private_json(request.run_dir / EXPERIMENT_RUN, record)

    # --- jobs -------------------------------------------------------------------------------------
    def run_dir(self, name: str) -> Path:
        """The run folder of job `name` (started here, or an earlier run under the runs folder)."""
        with self._lock:
            found = self._jobs.get(name)
        if found is not None:
            return found[0].run_dir
        return (self.options.runs_dir / name).resolve()

    def describe(self, name: str) -> JobStatus:
        if self._is_tuning(name):
            return self.tuning.describe(name)
        with self._lock:
            found = self._jobs.get(name)
        if found is not None:
            request, job = found
            error = job.error
            state = _short(job.state.value)
            created, started, ended = _times(name, read_events(request.run_dir), {})
            secrets = secret_values(dict(request.job.raw))
            return JobStatus(
                name=name,
                display_name=request.display_name,
                state=state,
                create_time=_rfc3339(created),
                start_time=_rfc3339(started),
                end_time=_rfc3339(ended) if state in TERMINAL_STATES else None,
                error=mask_text(error.message, secrets) if error else None,
                spec=mask_secrets(dict(request.job.raw)),
                location=request.ctx.region,
                secret_values=secrets,
            )
        run_dir = self.run_dir(name)
        spec = mask_secrets(read_run_json(run_dir / "job.json"))
        about = read_run_json(run_dir / RUN) or _about_from_plan(run_dir)
        summary = read_run_json(run_dir / SUMMARY)
        events = read_events(run_dir)
        if not (summary or events or spec):
            self.summary(name)  # raises UnknownLocalJob, saying where it looked
        created, started, ended = _times(name, events, summary)
        if summary:
            state = _short(str(summary.get("state", "")))
            message = (summary.get("error") or {}).get("message")
        elif events:
            # Started by a local-run in another process, which writes the summary when the job ends.
            state = _short(events[-1].job_state)
            message = next((e.message for e in reversed(events) if e.replica is None and e.message), None)
        else:
            state, message = "RUNNING", None  # a run from before events were kept, not finished yet
        secrets = self.secret_values(name)
        return JobStatus(
            name=name,
            display_name=str(summary.get("display_name") or about.get("display_name") or ""),
            state=state,
            create_time=_rfc3339(created),
            start_time=_rfc3339(started),
            end_time=_rfc3339(ended) if state in TERMINAL_STATES else None,
            error=mask_text(str(message), secrets) if message else None,
            spec=spec,
            location=str(about["location"]) if about.get("location") else None,
            secret_values=secrets,
        )

    def version(self, name: str) -> tuple[int, ...] | None:
        """What changes whenever `describe(name)` would (its run folder's files' sizes and times): a view
        may keep what it made of a job while this stays the same. None for a job running here."""
        with self._lock:
            if name in self._jobs:
                return None
        # job.json and run.json are written once, before the job starts (and its events with it).
        return file_stamp(self.options.runs_dir / name, (SUMMARY, EVENTS))

    def replicas(self, name: str) -> list[ReplicaInfo]:
        """Every replica with its latest state and exit code: from the job itself when it runs here, else from
        its run folder (the plan names them, the recorded events and then the summary tell their states)."""
        if self._is_tuning(name):
            return self.tuning.replicas(name)
        with self._lock:
            found = self._jobs.get(name)
        machines = _machines(self.describe(name).spec)

        def info(replica: str, state: str, exit_code: object = None, attempt: int = 0) -> ReplicaInfo:
            pool = _pool_of(replica)
            code = exit_code if isinstance(exit_code, int) else None
            return ReplicaInfo(replica, pool, machines.get(pool, ""), state, code, attempt)

        if found is not None:
            return [info(r.name, r.state.value, r.exit_code, r.attempt) for r in found[1].replicas()]
        run_dir = self.run_dir(name)
        latest: dict[str, ReplicaInfo] = {}
        for entry in read_run_json(run_dir / "plan.json").get("replicas") or []:
            if isinstance(entry, dict) and entry.get("name"):
                latest[str(entry["name"])] = info(str(entry["name"]), "PENDING")
        events = [e for e in read_events(run_dir) if e.replica is not None and e.replica_state is not None]
        for event in events:
            latest[str(event.replica)] = info(
                str(event.replica), str(event.replica_state), event.exit_code, event.attempt
            )
        if not events:  # a run from before events were kept
            for entry in read_run_json(run_dir / SUMMARY).get("replicas") or []:
                if isinstance(entry, dict) and entry.get("name"):
                    replica = str(entry["name"])
                    latest[replica] = info(replica, str(entry.get("state", "")), entry.get("exit_code"))
        return sorted(latest.values(), key=lambda r: (r.pool, r.name))

    def timeline(self, name: str) -> list[StateChange]:
        """The job's state changes and its replicas', oldest first (the run folder's recorded events; a run
        from before they were kept: its start and its end)."""
        if self._is_tuning(name):
            return self.tuning.timeline(name)
        run_dir = self.run_dir(name)
        events = read_events(run_dir)
        if not events:
            status = self.describe(name)
            steps = [StateChange(status.create_time, "PENDING")] if status.create_time else []
            if status.end_time:
                steps.append(StateChange(status.end_time, status.state, message=status.error or ""))
            return steps
        changes: list[StateChange] = []
        job_state = None
        for event in events:
            when = _rfc3339(event.time) or ""
            if event.replica is not None and event.replica_state is not None:
                changes.append(StateChange(when, event.replica_state, event.replica, event.exit_code))
            elif _short(event.job_state) != job_state or event.message:
                changes.append(StateChange(when, _short(event.job_state), message=event.message))
            job_state = _short(event.job_state)
        return changes

    def names(self) -> list[str]:
        """The ids of the jobs started here, then of the run folders of jobs (running or not, not tuning
        runs: `tuning.names()`), newest first, without reading any job's files."""
        with self._lock:
            names = list(self._jobs)
        names += run_folders(self.options.runs_dir, "job.json")
        return list(dict.fromkeys(names))

    def list(self, limit: int = 50) -> list[JobStatus]:
        """Jobs started here, then the run folders of jobs and tuning runs (running or not), newest first."""
        with self._lock:
            started = list(self._jobs)
        folders = sorted(
            [*run_folders(self.options.runs_dir, "job.json"), *self.tuning.names()], reverse=True
        )
        found = JobList()
        for name in list(dict.fromkeys([*started, *folders]))[:limit]:
            try:
                found.append(self.describe(name))
            except VertexdistError as exc:  # one run folder that cannot be read must not hide the others
                found.problems.append(f"{name}: {exc.message}")
            except (ValueError, TypeError, KeyError, AttributeError) as exc:  # its files hold the wrong types
                found.problems.append(
                    f"{name}: its run folder could not be read: {type(exc).__name__}: {exc}"
                )
        return found

    def cancel(self, name: str) -> None:
        if self._is_tuning(name):
            self.tuning.cancel(name)
            return
        self.job(name).cancel()

    def tuning_status(self, name: str) -> TuningStatus:
        """A tuning run's status, study and trials (what `vertexdist trials` shows)."""
        if not self._is_tuning(name):
            raise UsageError(
                f"{name} is not a tuning job: it has no trials",
                hint=f"its state: vertexdist status {name}",
            )
        return self.tuning.tuning(name)

    def outputs(self, name: str) -> FolderOutputs:
        """The job's output folder in its run folder (`gcs/` holds what its replicas wrote to gs://)."""
        if self._is_tuning(name):
            return self.tuning.outputs(name)
        return FolderOutputs(require_output_uri(name, self.describe(name).spec), self.run_dir(name) / "gcs")

    def logs(self, name: str, cursor: object | None = None, query: LogQuery | None = None) -> LogsPage:
        """The job's replica log lines after `cursor` in time order (stdout INFO, stderr ERROR)."""
        if self._is_tuning(name):
            return self.tuning.logs(name, cursor, query)
        if query is not None and query.trial is not None:
            raise UsageError(f"{name} is not a tuning job: it has no trials", hint="drop --trial")
        with self._lock:
            found = self._jobs.get(name)
        if found is not None:
            files, final = found[1].log_paths(), found[1].done
        else:
            run_dir = self.run_dir(name)
            folder = run_dir / "logs"
            files = {p.stem: p for p in folder.glob("workerpool*.log")} if folder.is_dir() else {}
            events = read_events(run_dir)
            final = (run_dir / SUMMARY).is_file() or bool(
                events and _short(events[-1].job_state) in TERMINAL_STATES
            )
        return masked(self._logs.page(files, cursor, query, final=final), self.secret_values(name))
