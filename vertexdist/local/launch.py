"""Starting a local job: a request's packages installed (and its image and network made) while the job is
PENDING, then its plan run by `LocalJob`; the ports and the network given back when it ends.

`schedule(request)` runs what `LocalBackend.dryrun` decided. `start_job(spec, ...)` is the emulator's way in:
a CustomJobSpec dict it received, whose packages are fetched from its storage first. Packages are
pip-installed the way Vertex installs `packageUris`, so a replica imports the installed copy, never the
source tree.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from vertexdist.local.environment import JobContext
from vertexdist.local.plan import DEFAULT_MAX_RESTARTS, LaunchPlan
from vertexdist.local.request import LocalRequest, build_request
from vertexdist.local.runner import DEFAULT_GRACE_S, DEFAULT_SETTLE_S, JobEvent, LocalJob
from vertexdist.wire.job_spec import parse_job_spec

FetchPackage = Callable[[str], Path]
InstallPackage = Callable[[Path, Path], Path]


def _default_install(sdist: Path, cache_dir: Path) -> Path:
    from vertexdist.packaging import install_package

    return install_package(sdist, cache_dir)


def _ready(request: LocalRequest, install: InstallPackage) -> LaunchPlan:
    """Everything the plan assumes exists: installed packages, the image and the job network."""
    for item in request.installs:
        install(item.sdist, item.target.parent)
    if request.docker is not None:
        request.docker.prepare()
    return request.plan


def _finish(request: LocalRequest) -> None:
    request.release()
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
) -> LocalJob:
    """Start `request` and return at once; a failure while it is PENDING fails the job with the reason."""

    def finish() -> None:
        _finish(request)
        if on_finish is not None:
            on_finish()

    return LocalJob(
        lambda: _ready(request, install or _default_install),
        on_event=on_event,
        on_finish=finish,
        grace_s=grace_s,
        settle_s=settle_s,
        timeout_s=timeout_s,
    ).start()


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
) -> LocalJob:
    """Start `spec` as a local job and return at once. While it is PENDING its packages are fetched and
    installed and its ports reserved; a spec that cannot run locally makes it FAILED with the reason."""
    requests: list[LocalRequest] = []

    def prepare() -> LaunchPlan:
        job = parse_job_spec(spec)
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
        return _ready(request, install or _default_install)

    def finish() -> None:
        for request in requests:
            _finish(request)

    return LocalJob(
        prepare, on_event=on_event, on_finish=finish, grace_s=grace_s, settle_s=settle_s, timeout_s=timeout_s
    ).start()
