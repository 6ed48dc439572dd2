"""Submitting a template to Vertex (or an emulator): where it goes, the emulator it may need, the same request
sent moments ago, the upload, the job's creation and following it. What `vertexdist submit` does, as calls
a recovery controller or a web console can make too; the CLI adds flags and printing.

    with open_submission(SubmitRequest(template, Where(project="p")), hooks) as session:
        print(session.dryrun().request)          # exactly what submit() sends (image planned, not built)
        job = session.submit()                   # image built, duplicates checked, package uploaded, created
        final = session.follow(job.name, on_status=print)

The request sent is exactly what `dryrun()` gives, with one field filled in when the job is created: its own
output folder (`<job-folder>` in the dry run) becomes a fresh UTC-time-and-random folder (`Submitted.
output_dir`), unless `resume_from` names an earlier job whose folder it continues. With `emulator` set the
job goes to the emulator serving its folder (`vertexdist emulator start`), else the session runs a local
Vertex + Cloud Storage in this process for the length of the `with` (and points the target at it: nothing
is written to the environment).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from vertexdist.backends.base import JobStatus, LogChunk, ProgressFn, SubmitOptions
from vertexdist.errors import UsageError, VertexdistError
from vertexdist.jobs.find import resume_output_dir, vertex_backend
from vertexdist.wire.gcs_uri import is_gs_uri

if TYPE_CHECKING:
    from vertexdist.backends.config import Target
    from vertexdist.backends.vertex import Submission, VertexBackend
    from vertexdist.container.ensure import BuildPlan
    from vertexdist.emulator.folder import Endpoints
    from vertexdist.spec.models import JobTemplate

DUPLICATE_WINDOW_S = 600.0
CANCEL_WAIT_S = 10.0  # Ctrl-C with an in-process emulator: how long the cancel may take to land
EMULATOR_DATA_DIR = Path(".vertexdist/emulator")


class DuplicateRequest(VertexdistError):
    """The very same request was submitted moments ago, and nobody said to submit it again."""


@dataclass(frozen=True)
class Where:
    """Where the job goes, as flags name it; None fields fall back to the template, then the environment."""

    project: str | None = None
    location: str | None = None
    staging_bucket: str | None = None
    endpoint: str | None = None
    transport: str | None = None


@dataclass(frozen=True)
class InProcessEmulator:
    """An emulator run in this process for the session's length: its data folder and processes per replica."""

    data_dir: Path = EMULATOR_DATA_DIR
    procs_per_replica: int | None = None


@dataclass(frozen=True)
class SubmitRequest:
    template: JobTemplate
    where: Where = Where()
    emulator: InProcessEmulator | None = None
    resume_from: str | None = None  # an earlier job's name or id, or a gs:// folder
    allow_duplicate: bool = False
    duplicate_window_s: float = DUPLICATE_WINDOW_S
    check_resource: bool = True  # read the template's persistent resource first: does the job fit it?


def _refuse(duplicates: list[JobStatus], message: str) -> None:
    raise DuplicateRequest(f"{message}; refusing to create a duplicate")


def _quiet(_line: str) -> None:
    pass


def _no_progress(_submission: Submission) -> AbstractContextManager[ProgressFn | None]:
    return nullcontext(None)


@dataclass(frozen=True)
class SubmitHooks:
    """What the caller shows or decides while a submission works; the defaults show nothing and refuse a
    duplicate.

    - `notice(line)`: a line for the person submitting (the emulator's address, image build steps, ...).
    - `on_duplicates(jobs, message)`: the same request was sent moments ago; return to submit it anyway,
      raise to stop.
    - `upload_progress(submission)`: a context around the upload that gives its progress callback.
    - `on_uploaded(submission, uploaded)`: the package is in the bucket (False: it was there already).
    """

    notice: Callable[[str], None] = _quiet
    on_duplicates: Callable[[list[JobStatus], str], None] = _refuse
    upload_progress: Callable[[Submission], AbstractContextManager[ProgressFn | None]] = _no_progress
    on_uploaded: Callable[[Submission, bool], None] = field(default=lambda _s, _u: None)


@dataclass(frozen=True)
class Submitted:
    name: str  # the job's resource name
    output_dir: str  # its own output folder (or the resumed one)
    resumed: bool
    submission: Submission


class SubmitSession:
    """One template's submission to one target, made by `open_submission`."""

    def __init__(
        self,
        template: JobTemplate,
        target: Target,
        *,
        request: SubmitRequest,
        hooks: SubmitHooks,
        resume_from: str | None,
        in_process: bool,
    ) -> None:
        from vertexdist.jobs.emulator_storage import with_emulator_storage
        from vertexdist.jobs.run_record import with_code_labels

        self.template = with_code_labels(template)  # the code's git commit as a label (run_record)
        # An emulator's endpoint brings its Cloud Storage's (for the package upload): jobs.emulator_storage.
        self.target = target = with_emulator_storage(target)
        self.backend: VertexBackend = vertex_backend(target)
        self.resume_from = resume_from  # the earlier job's output folder (gs://)
        self.in_process = in_process  # the emulator runs in this process, and stops with the session
        self._request = request
        self._hooks = hooks

    def _image(self, *, dry_run: bool) -> str | None:
        """A `build` template's image: its content-addressed URI (dry run), or built and pushed unless that
        tag exists already (vertexdist.container, issue 6)."""
        if self.template.build is None:
            return None
        from vertexdist.container.ensure import ensure_image, plan_build

        if dry_run:
            return plan_build(self.template).image_uri
        if self.target.is_emulator:
            return self._emulator_image(plan_build(self.template))
        return ensure_image(self.template, log=self._hooks.notice).image_uri

    def _emulator_image(self, plan: BuildPlan) -> str:
        """The emulator runs a job's image from this machine's Docker daemon: built there (on the local
        stand-in base where the template's cannot be pulled), never pushed; without a daemon, not built,
        and the emulator runs the pools on this host (vertexdist.local.runtime_containers)."""
        from vertexdist.container.docker import DockerCliRunner, docker_daemon_answers
        from vertexdist.local.docker_launcher import ensure_local_image

        notice = self._hooks.notice
        if not docker_daemon_answers():
            notice(f"no Docker daemon answers: {plan.image_uri} is not built; the emulator runs the job here")
            return plan.image_uri
        if ensure_local_image(plan, DockerCliRunner(log=notice)):
            notice(f"built {plan.image_uri} in the local Docker daemon, where the emulator runs it")
        return plan.image_uri

    def _options(self, *, dry_run: bool) -> SubmitOptions:
        return SubmitOptions(image_uri=self._image(dry_run=dry_run), resume_from=self.resume_from)

    def dryrun(self) -> Submission:
        """The exact request, secrets unmasked (mask them to show it); its image planned, not built."""
        return self.backend.dryrun(self.template, self._options(dry_run=True))

    def submit(self) -> Submitted:
        """Build the image (if any), check for the same request sent moments ago, upload the package and
        create the job."""
        from vertexdist.jobs.emulator_storage import require_storage

        backend, hooks = self.backend, self._hooks
        require_storage(self.target)
        if self._request.check_resource:
            self._check_resource()
        submission = backend.dryrun(self.template, self._options(dry_run=False))
        # An emulator started for this command too: its folder keeps the jobs, as a shared one does.
        if not self._request.allow_duplicate:
            window = self._request.duplicate_window_s
            duplicates = backend.recent_duplicates(submission, window)
            if duplicates:
                first = duplicates[0]
                hooks.on_duplicates(
                    duplicates,
                    f"the same request was submitted {len(duplicates)} time(s) in the last {window / 60:.0f}"
                    f" minutes, latest {first.name} ({first.state})",
                )
        if submission.package_path is not None:
            with hooks.upload_progress(submission) as progress:
                uploaded = backend.upload(submission, progress)
            hooks.on_uploaded(submission, uploaded)
        submission = submission.for_new_job()
        name = backend.schedule(submission)
        from vertexdist.jobs.record_store import keep_submission_record

        keep_submission_record(backend, self.template, name, submission, hooks.notice)
        return Submitted(name, str(submission.output_dir), self.resume_from is not None, submission)

    def _check_resource(self) -> None:
        """Refuse, at `persistent_resource_id:`'s line, a job that does not fit its persistent resource
        (`jobs.resource_check`), before anything is built or uploaded."""
        if self.template.persistent_resource_id is None:
            return
        from vertexdist.backends.vertex.pools import PersistentResources
        from vertexdist.errors import TemplateError
        from vertexdist.jobs.resource_check import resource_fit

        path = self.template.source_path or Path("template.yaml")
        problems = resource_fit(path, self.template, PersistentResources(self.target))
        if problems:
            raise TemplateError(problems=problems)

    def follow(
        self,
        name: str,
        *,
        on_status: Callable[[JobStatus], None],
        on_logs: Callable[[LogChunk, JobStatus], None] | None = None,
    ) -> JobStatus:
        """Poll the job until it ends (its logs to `on_logs`, if given); its last status."""
        from vertexdist.backends.watch import follow_policy, watch

        # Local jobs change state within seconds; Vertex jobs within minutes, so back off further there.
        policy = follow_policy(self.target.is_emulator, logs=on_logs is not None)
        try:
            return watch(self.backend, name, on_status=on_status, on_logs=on_logs, policy=policy)
        except KeyboardInterrupt:
            if self.in_process:
                self._cancel_before_the_emulator_stops(name)
            raise

    def _cancel_before_the_emulator_stops(self, name: str, wait_s: float = CANCEL_WAIT_S) -> None:
        """Ctrl-C stops the in-process emulator with the session: cancel the job through its API first and
        wait (briefly) for it to read CANCELLED: recorded as cancelled, not lost with the emulator."""
        import time

        try:
            self.backend.cancel(name)
            deadline = time.monotonic() + wait_s
            status = self.backend.describe(name)
            while not status.done and time.monotonic() < deadline:
                time.sleep(0.1)
                status = self.backend.describe(name)
        except VertexdistError as exc:
            self._hooks.notice(f"interrupted; cancelling {name} failed: {exc}")
            return
        state = status.state if status.done else f"{status.state} (still stopping)"
        self._hooks.notice(f"Ctrl-C: job cancelled ({state}) before the emulator stopped: {name}")


def serving_emulator(data_dir: Path) -> Endpoints | None:
    """The endpoints of the emulator serving `data_dir` now (`vertexdist emulator start`), or None."""
    from vertexdist.emulator.folder import serving

    return serving(data_dir)


def _emulator_endpoint(where: Where, env: Mapping[str, str]) -> bool:
    endpoint = where.endpoint or env.get("VERTEX_API_ENDPOINT") or ""
    return endpoint.strip().startswith("http://")


def resolve_target(
    template: JobTemplate,
    where: Where,
    env: Mapping[str, str] = os.environ,
    *,
    on_emulator: bool = False,
    no_project_hint: str | None = None,
) -> tuple[JobTemplate, Target]:
    """Where the job goes: flags > template > environment (see backends.config); the template follows.
    `on_emulator`: a job for an emulator needs no Google Cloud project (LOCAL_PROJECT when none is named)."""
    from vertexdist.backends.config import LOCAL_PROJECT, NO_PROJECT_HINT
    from vertexdist.backends.config import resolve_target as resolve
    from vertexdist.spec.models import project_id_problem

    target = resolve(
        env=env,
        template_project=template.project,
        template_location=template.location,
        template_bucket=template.staging_bucket,
        project=where.project,
        location=where.location,
        staging_bucket=where.staging_bucket,
        api_endpoint=where.endpoint,
        transport=where.transport,
        default_project=LOCAL_PROJECT if on_emulator or _emulator_endpoint(where, env) else None,
        no_project_hint=no_project_hint or NO_PROJECT_HINT,
    )
    problem = project_id_problem(target.project)
    if problem:
        source = (
            "--project" if where.project else "the template" if template.project else "GOOGLE_CLOUD_PROJECT"
        )
        raise UsageError(f"{source}: {problem}", hint="use the project's id, e.g. my-project")
    updated = template.model_copy(
        update={
            "project": target.project,
            "location": target.location,
            "staging_bucket": target.staging_bucket,
        }
    )
    return updated, target


@contextmanager
def open_submission(
    request: SubmitRequest,
    hooks: SubmitHooks | None = None,
    *,
    dry_run: bool = False,
    env: Mapping[str, str] = os.environ,
) -> Iterator[SubmitSession]:
    """The session of `request`: its target resolved, the earlier job it resumes found, and the in-process
    emulator (if asked for) running until the `with` ends. `dry_run`: only `dryrun()` will be called, so the
    emulator is started only if the job to resume must be looked up on it."""
    hooks = hooks or SubmitHooks()
    template = request.template
    where = request.where
    emulator = request.emulator
    served = serving_emulator(emulator.data_dir) if emulator is not None else None
    if served is not None and emulator is not None and emulator.procs_per_replica is not None:
        raise UsageError(
            f"--procs-per-replica {emulator.procs_per_replica}: the emulator serving {emulator.data_dir}"
            " runs its jobs with its own setting",
            hint="drop --procs-per-replica, or restart it: vertexdist emulator start --procs-per-replica N",
        )
    if emulator is not None:
        from vertexdist.backends.local.prepare import check_procs_per_replica

        check_procs_per_replica(template, emulator.procs_per_replica)
        if template.build is not None:
            from vertexdist.container.docker import docker_daemon_answers

            if docker_daemon_answers():
                # Built into the local daemon (SubmitSession._emulator_image), where the emulator runs it.
                hooks.notice("emulator: a Docker daemon answers, so the job runs the template's image in it")
            else:
                # Like local-run without --docker, the emulator runs the same trainer as a Python package.
                hooks.notice(
                    "emulator: no Docker daemon: `build` ignored; the trainer runs as a Python package"
                )
                template = template.model_copy(update={"build": None})
    resume = request.resume_from
    needs_emulator = not dry_run or (resume is not None and not is_gs_uri(resume))
    with ExitStack() as stack:
        if emulator is not None and served is not None:
            # `vertexdist emulator start` serves the folder: the job goes to it, as the job commands' do.
            where = replace(where, endpoint=served.vertex, transport="rest")
            env = {**env, "STORAGE_EMULATOR_HOST": served.storage}
            hooks.notice(f"emulator: the one serving {emulator.data_dir}, at {served.vertex}")
        elif emulator is not None and needs_emulator:
            from vertexdist.emulator import Emulator

            emu = stack.enter_context(
                Emulator(
                    data_dir=emulator.data_dir,
                    procs_per_replica=emulator.procs_per_replica,
                )
            )
            where = replace(where, endpoint=emu.vertex_endpoint, transport="rest")
            env = {**env, "STORAGE_EMULATOR_HOST": emu.storage_endpoint}
            hooks.notice(f"emulator: {emu.vertex_endpoint} (storage {emu.storage_endpoint})")
            hooks.notice(f"emulator: jobs, logs and outputs (gs:// paths) under {emu.data_dir}")
            from vertexdist.local.runtime_containers import container_mode

            hooks.notice(f"emulator: {container_mode()}")
        template, target = resolve_target(template, where, env, on_emulator=emulator is not None)
        resumed = None
        if resume is not None:
            resumed = resume_output_dir(
                resume,
                project=target.project,
                location=target.location,
                endpoint=target.api_endpoint,
                transport=target.api_transport,
            )
        yield SubmitSession(
            template,
            target,
            request=request,
            hooks=hooks,
            resume_from=resumed,
            in_process=emulator is not None and served is None,
        )
