"""A template made ready for the local backend: packaged and rendered the way submit does (same sdist, same
CustomJobSpec), read once into the typed job, and planned.

A `build` template runs its image on Vertex; here its replicas run the image's command on the host, from
the build context, with the Dockerfile's environment, or (`docker=True`) as containers of the built image.

The job's own output folder is `<base>/<job id>` (see `vertexdist.render`), in the run's own gs:// namespace
(`<run folder>/gcs`), unless `resume_from` names an earlier run to continue (`backends.local.resume`).
The run folder is the user's alone (mode 0700): its files hold the job's spec.
"""

from __future__ import annotations

import calendar
import re
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vertexdist.backends.base import LOCAL_PROJECT, with_project
from vertexdist.backends.local.resume import ResumedRun, find_run, link_gcs_root
from vertexdist.errors import UsageError
from vertexdist.local.environment import JobContext
from vertexdist.local.request import LocalRequest, build_docker_request, build_request
from vertexdist.wire.job_spec import parse_job_spec

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate

RUNS_DIR = Path(".vertexdist/runs")
PACKAGE_CACHE = Path(".vertexdist/cache/packages")


@dataclass(frozen=True)
class LocalOptions:
    """How `local-run` runs a template: where, how many processes per replica, on the host or in docker."""

    runs_dir: Path = RUNS_DIR
    out: Path | None = None  # the run folder itself (default: <runs_dir>/<job id>)
    package_cache: Path = PACKAGE_CACHE
    procs_per_replica: int | None = None
    docker: bool = False
    warm: bool = False  # replicas forked from the warm pool (`local.warm_pool`) where they can be
    warm_socket: Path | None = None  # ... from this pool, someone else's (a managed run's controller's)


_NOTED: set[str] = set()


def package_cache(options: LocalOptions) -> Path:
    """Where packages are installed: the folder's cache, or this user's own when another user's is in the
    way (`vertexdist.user_cache`; said once, on stderr)."""
    from vertexdist.user_cache import usable_cache_dir

    found = usable_cache_dir(options.package_cache.resolve())
    if found.note and found.note not in _NOTED:
        _NOTED.add(found.note)
        print(found.note, file=sys.stderr)
    return found.path


def new_job_id() -> str:
    return time.strftime("local-%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(2)


def is_job_id(text: str) -> bool:
    """Whether `text` is a name `new_job_id` gives."""
    return re.fullmatch(r"local-\d{8}-\d{6}-[0-9a-f]{4}", text) is not None


def job_id_time(text: str) -> float | None:
    """When the job of id `text` was made (its UTC second, seconds since the epoch), None for other names."""
    if not is_job_id(text):
        return None
    try:
        made = time.strptime(text[len("local-") : len("local-YYYYmmdd-HHMMSS")], "%Y%m%d-%H%M%S")
    except ValueError:
        return None
    return float(calendar.timegm(made))


def require_docker(t: JobTemplate, *, need_daemon: bool) -> None:
    """`--docker` needs a template with an image to build and, to run, a Docker daemon that answers."""
    if t.build is None:
        where = f" {t.source_path}" if t.source_path else ""
        raise UsageError(
            f"--docker runs the replicas in the template's image, but the template{where} has no "
            "`build` section",
            hint="drop --docker to run the replicas on the host, or add a `build` section",
        )
    if need_daemon:
        from vertexdist.container.docker import docker_daemon_answers

        if not docker_daemon_answers():
            raise UsageError(
                "--docker needs a Docker daemon, and none answers (`docker version` reached no server)",
                hint="start Docker, or drop --docker: without it the replicas run on the host",
            )


def check_procs_per_replica(t: JobTemplate, procs_per_replica: int | None) -> None:
    """`--procs-per-replica` needs something that starts processes per replica: a launcher, or the
    bundled trainer (which starts its own); user code run with `launcher: python` runs once per machine."""
    if procs_per_replica is None or t.trainer.launcher != "python" or t.trainer.is_bundled:
        return
    where = f" {t.source_path}" if t.source_path else ""
    raise UsageError(
        f"--procs-per-replica {procs_per_replica}: the template{where} runs {t.trainer.module} with"
        " `launcher: python`, once per machine as Vertex does, so there are no processes per replica to set",
        hint="set trainer.launcher: torchrun in the template (N processes per replica), or drop the flag",
    )


RUN_DIR_MODE = 0o700


def make_run_dir(run_dir: Path) -> None:
    """The run folder, for the user only (its job.json and logs may say more than others should read)."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        run_dir.chmod(RUN_DIR_MODE)
    except OSError as exc:
        raise UsageError(
            f"cannot create the run folder {run_dir}: {exc.strerror or exc}", hint="pick another --out"
        ) from exc


# Where a job that names no baseOutputDirectory writes its outputs locally (AIP_MODEL_DIR and its siblings),
# so its model still lands in the run folder: a bucket of its own in the run's gs:// namespace.
DEFAULT_OUTPUT_BUCKET = "gs://vertexdist-local"


@dataclass(frozen=True)
class PreparedRun:
    """A local run's identity and place, the same for a template job and a tuning job: its job id, run
    folder, the replicas' context (gs:// namespace, processes per replica, default output folder) and the
    earlier run it resumes."""

    job_id: str
    run_dir: Path
    ctx: JobContext
    resumed: ResumedRun | None = None

    @property
    def resume_uri(self) -> str | None:
        """The earlier run's output folder, which this run's request names instead of a new one."""
        return self.resumed.output_uri if self.resumed else None


def prepare_run(
    t: JobTemplate, options: LocalOptions, *, scratch: Path | None = None, resume_from: str | None = None
) -> PreparedRun:
    """The one way into a local run, for template jobs and tuning jobs alike: check the options that hold
    for both, pick the job id and run folder, find the run it resumes, and (unless `scratch` marks a dry
    run) make the run folder, its gs:// namespace the resumed run's."""
    check_procs_per_replica(t, options.procs_per_replica)
    resumed = find_run(resume_from, options.runs_dir) if resume_from is not None else None
    job_id = new_job_id()
    run_dir = (options.out or options.runs_dir / job_id).resolve()
    ctx = JobContext(
        job_id=job_id,
        project=t.project or LOCAL_PROJECT,
        region=t.location,
        gcs_root=str(resumed.gcs_root if resumed else run_dir / "gcs"),
        procs_per_replica=options.procs_per_replica,
        default_output_uri=f"{DEFAULT_OUTPUT_BUCKET}/{job_id}",
    )
    if scratch is None:
        make_run_dir(run_dir)
        if resumed is not None:
            link_gcs_root(run_dir, resumed)
    return PreparedRun(job_id, run_dir, ctx, resumed)


def prepare_request(
    t: JobTemplate, options: LocalOptions, *, scratch: Path | None = None, resume_from: str | None = None
) -> LocalRequest:
    """The template's local request. With `scratch` (a dry run) the sdist goes there, no run folder is made
    and `--docker` needs no daemon; otherwise the run folder is made before anything is built into it.
    `resume_from` names an earlier run (id or folder) whose output folder this run continues."""
    from vertexdist.render import render_job_spec

    t = with_project(t)
    if options.docker:
        require_docker(t, need_daemon=scratch is None)
    run = prepare_run(t, options, scratch=scratch, resume_from=resume_from)
    job_id, run_dir, ctx, resume_uri = run.job_id, run.run_dir, run.ctx, run.resume_uri
    if t.build is not None:
        from vertexdist.container.ensure import plan_build

        image_build = plan_build(t)
        spec = render_job_spec(t, image_uri=image_build.image_uri, job_folder=job_id, resume_from=resume_uri)
        if options.docker:
            job = parse_job_spec(spec, require_command=False)
            return build_docker_request(job, ctx, image_build, run_dir=run_dir, display_name=t.display_name)
        from vertexdist.local.host_container import host_job_spec

        assert t.build is not None
        host_spec = host_job_spec(
            spec,
            image_uri=image_build.image_uri,
            context=Path(t.build.context),
            dockerfile=Path(t.build.dockerfile),
        )
        return build_request(
            parse_job_spec(host_spec),
            ctx,
            run_dir=run_dir,
            sdists={},
            cache_dir=package_cache(options),
            display_name=t.display_name,
        )
    from vertexdist.packaging import build_sdist, package_uri

    sdist = build_sdist(t.trainer, scratch or run_dir / "package")
    uri = package_uri(t.staging_bucket, sdist)
    return build_request(
        parse_job_spec(render_job_spec(t, package_uri=uri, job_folder=job_id, resume_from=resume_uri)),
        ctx,
        run_dir=run_dir,
        sdists={uri: sdist.path},
        cache_dir=package_cache(options),
        display_name=t.display_name,
    )
