"""The local backend: a template's job on this machine, behind the same interface as the Vertex backend.

`dryrun(template)` packages and renders the template as submit does and returns the `LocalRequest` with its
launch plan (what `local-run --plan` prints); `schedule(request)` runs exactly that plan and returns the
job id. `describe`, `list`, `cancel` and `logs` address a job by that id: one started here, or the run
folder an earlier `local-run` left (its `summary.json`). A tuning template's request is a
`LocalTuningRequest`, run (and described, listed, cancelled, read) by `backends.local.tuning`: its trials
are local jobs of their own. Each run folder keeps `job.json` (the CustomJobSpec), `plan.json`,
`summary.json`, `logs/` and the replicas' working folders, all for the user only (files 0600, folders
0700). `job.json` and `plan.json` mask secret-looking env values as every printout does: nothing reads the
real values back from them (a run is started from its template, and resuming one needs only its output
folder), so the real values live only in the replicas' environments.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertexdist.backends.base import NO_OPTIONS, JobResult, JobStatus, LogQuery, LogsPage, SubmitOptions
from vertexdist.backends.local.logs import LocalLogs
from vertexdist.backends.local.prepare import LocalOptions, prepare_request
from vertexdist.backends.local.resume import local_path
from vertexdist.backends.outputs import FolderOutputs, require_output_uri
from vertexdist.errors import VertexdistError
from vertexdist.local.request import LocalRequest
from vertexdist.local.runner import LocalJob
from vertexdist.private_files import make_private_dir, write_private_json
from vertexdist.render import mask_secrets, secret_values
from vertexdist.spec.models import JobTemplate

if TYPE_CHECKING:
    from vertexdist.backends.local.tuning import LocalTuningBackend, LocalTuningRequest

SUMMARY = "summary.json"


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
                "log": str(r.log_path),
            }
            for r in result.replicas
        ],
    }


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
        write_private_json(run_dir / "plan.json", request.to_dict())
        output_dir = request.job.output_uri_prefix
        output_path = local_path(output_dir, Path(request.ctx.gcs_root)) if output_dir else None

        def write_summary() -> None:
            job = self.job(request.job_id)
            summary = summary_of(
                request.job_id,
                request.display_name,
                run_dir,
                job.result(),
                output_dir=output_dir,
                output_path=output_path,
            )
            write_private_json(run_dir / SUMMARY, summary)

        job = schedule(
            request,
            on_event=options.on_event,
            on_finish=write_summary,
            grace_s=self._grace_s,
            timeout_s=self._timeout_s,
            # As on Vertex, the job's code finds its service account on a metadata server (issue 17).
            services=JobServices(identity=identity_of(request)),
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
        """The secret env values of a job started here, so views can mask them in log lines."""
        with self._lock:
            found = self._jobs.get(name)
        return secret_values(dict(found[0].job.raw)) if found is not None else ()

    def summary(self, name: str) -> dict[str, Any]:
        """The finished job's summary (what its run folder's summary.json holds)."""
        path = self.run_dir(name) / SUMMARY
        try:
            return dict(json.loads(path.read_text()))
        except (OSError, ValueError):
            raise UnknownLocalJob(
                f"local job {name} has no summary in {path}", hint="it may still be running"
            ) from None

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
            return JobStatus(
                name=name,
                display_name=request.display_name,
                state=job.state.value.removeprefix("JOB_STATE_"),
                error=error.message if error else None,
                spec=mask_secrets(dict(request.job.raw)),
            )
        spec_path = self.run_dir(name) / "job.json"
        spec = json.loads(spec_path.read_text()) if spec_path.is_file() else {}
        if spec and not (self.run_dir(name) / SUMMARY).is_file():
            # Started by a local-run in another process, which writes the summary when the job ends.
            return JobStatus(name=name, display_name="", state="RUNNING", spec=mask_secrets(spec))
        summary = self.summary(name)
        return JobStatus(
            name=name,
            display_name=str(summary.get("display_name", "")),
            state=str(summary.get("state", "")).removeprefix("JOB_STATE_"),
            error=(summary.get("error") or {}).get("message"),
            spec=mask_secrets(spec),
        )

    def list(self, limit: int = 50) -> list[JobStatus]:
        """Jobs started here, then earlier run folders (tuning runs' too), newest first."""
        with self._lock:
            names = list(self._jobs)
        if self._tuning_backend is not None:
            names += [s.name for s in self._tuning_backend.list(limit)]
        runs = self.options.runs_dir
        if runs.is_dir():
            names += sorted((p.name for p in runs.iterdir() if (p / SUMMARY).is_file()), reverse=True)
        return [self.describe(name) for name in list(dict.fromkeys(names))[:limit]]

    def cancel(self, name: str) -> None:
        if self._is_tuning(name):
            self.tuning.cancel(name)
            return
        self.job(name).cancel()

    def outputs(self, name: str) -> FolderOutputs:
        """The job's output folder in its run folder (`gcs/` holds what its replicas wrote to gs://)."""
        if self._is_tuning(name):
            return self.tuning.outputs(name)
        return FolderOutputs(require_output_uri(name, self.describe(name).spec), self.run_dir(name) / "gcs")

    def logs(self, name: str, cursor: object | None = None, query: LogQuery | None = None) -> LogsPage:
        """The job's replica log lines after `cursor` in time order (stdout INFO, stderr ERROR)."""
        if self._is_tuning(name):
            return self.tuning.logs(name, cursor, query)
        with self._lock:
            found = self._jobs.get(name)
        if found is not None:
            files, final = found[1].log_paths(), found[1].done
        else:
            run_dir = self.run_dir(name)
            folder = run_dir / "logs"
            files = {p.stem: p for p in folder.glob("workerpool*.log")} if folder.is_dir() else {}
            final = (run_dir / SUMMARY).is_file()
        return self._logs.page(files, cursor, query, final=final)
