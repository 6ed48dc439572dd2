"""Starting a local job: a request's packages installed (and its image and network made) while the job is
PENDING, then its plan run by `LocalJob`; the ports and the network given back when it ends.

`schedule(request)` runs what `LocalBackend.dryrun` decided. `start_job(spec, ...)` is the emulator's way in:
a CustomJobSpec dict it received, whose packages are fetched from its storage first. Packages are
pip-installed the way Vertex installs `packageUris`, so a replica imports the installed copy, never the
source tree.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from vertexdist.errors import VertexdistError
from vertexdist.local.environment import JobContext
from vertexdist.local.events import recorder
from vertexdist.local.job_services import JobServices, replica_base_env
from vertexdist.local.metadata_server import JobIdentity
from vertexdist.local.plan import DEFAULT_MAX_RESTARTS, LaunchPlan
from vertexdist.local.request import LocalRequest, build_request
from vertexdist.local.runner import DEFAULT_GRACE_S, DEFAULT_SETTLE_S, JobEvent, LocalJob, Spawner
from vertexdist.wire.gcs_uri import local_gs_path
from vertexdist.wire.job_spec import JobSpec, parse_job_spec

FetchPackage = Callable[[str], Path]
FetchObject = Callable[[str, Path], Path]
InstallPackage = Callable[[Path, Path], Path]

_log = logging.getLogger(__name__)


def _default_install(sdist: Path, cache_dir: Path) -> Path:
    from vertexdist.packaging import install_package

    return install_package(sdist, cache_dir)


def identity_of(request: LocalRequest) -> JobIdentity:
    """Who the job's code runs as: its project and region, the spec's service account (or Vertex's)."""
    ctx = request.ctx
    return JobIdentity(ctx.project, ctx.region, ctx.job_id, str(request.job.raw.get("serviceAccount") or ""))


def _ready(request: LocalRequest, install: InstallPackage, services: JobServices | None = None) -> LaunchPlan:
    """Everything the plan assumes exists: the requirements' environment, installed packages, the image
    and the job network, the services replicas reach (not for containers, which cannot reach loopback)."""
    if request.env is not None:
        from vertexdist.local.requirements_env import ensure_env

        ensure_env(request.env)
    for item in request.installs:
        install(item.sdist, item.target.parent)
    if request.docker is not None:
        request.docker.prepare()
        return request.plan
    return services.start(request.plan) if services is not None else request.plan


def _finish(request: LocalRequest, services: JobServices | None = None) -> None:
    request.release()
    if services is not None:
        services.stop()
    if request.docker is not None:
        request.docker.finish()


def schedule(
    request: LocalRequest,
    *,
    on_event: Callable[[JobEvent], None] | None = None,
    on_finish: Callable[[], None] | None = None,
    grace_s: float = DEFAULT_GRACE_S,
    settle_s: float = DEFAULT_SETTLE_S,
    timeout_s: float | None = None,
    install: InstallPackage | None = None,
    services: JobServices | None = None,
    spawner: Spawner | None = None,
    health_logs: bool = False,
) -> LocalJob:
    """Start `request` and return at once; a failure while it is PENDING fails the job with the reason.
    `services` (a metadata server, extra endpoints) run for the job's length."""

    def finish() -> None:
        _finish(request, services)
        if on_finish is not None:
            on_finish()

    return LocalJob(
        lambda: _ready(request, install or _default_install, services),
        # The run folder keeps every state change, for views in other processes (`vertexdist ui`).
        on_event=recorder(request.run_dir, on_event),
        on_finish=finish,
        grace_s=grace_s,
        settle_s=settle_s,
        timeout_s=timeout_s,
        base_env=services.base_env() if services is not None else None,
        spawner=spawner,
        health_logs=health_logs,
    ).start()


def _stage_gcs_inputs(job: JobSpec, gcs_root: Path, fetch_object: FetchObject | None) -> None:
    """Copy the objects the container pools' commands name under `/gcs/` into the job's storage folder."""
    from vertexdist.local.isolated_container import gcs_objects

    if fetch_object is None:
        return
    words = [w for p in job.pools if p.kind == "container" for w in (*p.command, *p.args)]
    for uri in gcs_objects(words):
        with contextlib.suppress(VertexdistError):  # an output path, or a folder: nothing to stage
            fetch_object(uri, local_gs_path(uri, gcs_root))


def _isolate_containers(request: LocalRequest, fetch_object: FetchObject | None, python: str) -> LaunchPlan:
    """The plan with its container replicas isolated from this host, their `/gcs/` inputs staged."""
    from vertexdist.local.isolated_container import isolated_plan, make_sandboxes

    gcs_root = Path(request.ctx.gcs_root)
    _stage_gcs_inputs(request.job, gcs_root, fetch_object)
    plan = isolated_plan(request.plan, gcs_root, os.environ.get("PATH", os.defpath))
    make_sandboxes(plan, python)
    return plan


def start_job(
    spec: Mapping[str, Any],
    ctx: JobContext,
    *,
    run_dir: Path,
    fetch_package: FetchPackage,
    cache_dir: Path | None = None,
    on_event: Callable[[JobEvent], None] | None = None,
    grace_s: float = DEFAULT_GRACE_S,
    settle_s: float = DEFAULT_SETTLE_S,
    timeout_s: float | None = None,
    gpus: Sequence[str] | None = None,
    install: InstallPackage | None = None,
    max_restarts: int = DEFAULT_MAX_RESTARTS,
    python: str = sys.executable,
    serve_metadata: bool = False,
    replica_env: Mapping[str, str] | None = None,
    fetch_object: FetchObject | None = None,
    spawner: Spawner | None = None,
    health_logs: bool = False,
) -> LocalJob:
    """Start `spec` as a local job and return at once. While it is PENDING its packages are fetched and
    installed and its ports reserved; a spec that cannot run locally makes it FAILED with the reason.
    `serve_metadata` gives the replicas a metadata server of the job's service account; `replica_env`
    (e.g. the emulator's STORAGE_EMULATOR_HOST) is added to every replica's environment. Container pools
    run isolated (`isolated_container`); `fetch_object(gs_uri, dest)` copies the objects their command
    names under `/gcs/` into the job's Cloud Storage folder first. `health_logs`: the ranks watch as on
    Vertex (the emulator's: `LocalJob`)."""
    requests: list[LocalRequest] = []
    services = JobServices(env=dict(replica_env or {}))

    def prepare() -> LaunchPlan:
        from vertexdist.local.runtime_containers import runtime_for, runtime_request

        job = parse_job_spec(spec, require_command=False)
        runtime, host_mode = runtime_for(job)
        if runtime is not None:
            _stage_gcs_inputs(job, Path(ctx.gcs_root), fetch_object)
            request = runtime_request(job, ctx, Path(run_dir), runtime, max_restarts)
            requests.append(request)
            return _ready(request, install or _default_install)
        job = parse_job_spec(spec)  # without a runtime, a container pool needs its command
        uris = dict.fromkeys(uri for pool in job.pools for uri in pool.package_uris)
        request = build_request(
            job,
            ctx,
            run_dir=run_dir,
            sdists={uri: fetch_package(uri) for uri in uris},
            cache_dir=cache_dir or Path(run_dir) / "packages",
            gpus=gpus,
            python=python,
            max_restarts=max_restarts,
        )
        requests.append(request)
        if any(r.kind == "container" for r in request.plan.replicas):
            request.plan = _isolate_containers(request, fetch_object, python)
            if host_mode:
                _log.info("%s: %s", ctx.job_id, host_mode)
        if serve_metadata:
            services.identity = identity_of(request)
        return _ready(request, install or _default_install, services)

    def finish() -> None:
        for request in requests:
            _finish(request, services)

    return LocalJob(
        prepare,
        on_event=on_event,
        on_finish=finish,
        grace_s=grace_s,
        settle_s=settle_s,
        timeout_s=timeout_s,
        base_env=replica_base_env(serve_metadata),
        spawner=spawner,
        health_logs=health_logs,
    ).start()
