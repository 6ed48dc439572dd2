"""The local backend's entry points: a CustomJobSpec dict in, a running LocalJob (or a plan) out.

Used by `vertexdist local-run` and by the emulator, which hands it the jobs it receives. Packages are
fetched (`fetch_package(uri) -> sdist path`) and pip-installed the way Vertex installs `packageUris`, so a
replica imports the installed copy, never the source tree.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from vertexdist.local.environment import JobContext, replica_slots
from vertexdist.local.gpus import host_gpus
from vertexdist.local.job import JobSpec, parse_job_spec
from vertexdist.local.plan import DEFAULT_MAX_RESTARTS, LaunchPlan, build_plan
from vertexdist.local.ports import PortReservation, reserve_ports
from vertexdist.local.runner import DEFAULT_GRACE_S, DEFAULT_SETTLE_S, JobEvent, LocalJob

FetchPackage = Callable[[str], Path]
InstallPackage = Callable[[Path, Path], Path]


def _default_install(sdist: Path, cache_dir: Path) -> Path:
    from vertexdist.packaging import install_package

    return install_package(sdist, cache_dir)


def install_packages(
    job: JobSpec, fetch_package: FetchPackage, cache_dir: Path, install: InstallPackage | None = None
) -> dict[str, str]:
    """packageUri -> installed folder, for every package any pool needs (each installed once)."""
    install = install or _default_install
    dirs: dict[str, str] = {}
    for pool in job.pools:
        for uri in pool.package_uris:
            if uri not in dirs:
                dirs[uri] = str(install(fetch_package(uri), cache_dir))
    return dirs


def prepare_plan(
    spec: Mapping[str, Any],
    ctx: JobContext,
    *,
    run_dir: Path,
    ports: Sequence[int],
    package_dirs: Mapping[str, str],
    gpus: Sequence[str] | None = None,
    python: str = sys.executable,
    max_restarts: int = DEFAULT_MAX_RESTARTS,
) -> LaunchPlan:
    job = parse_job_spec(spec)
    return build_plan(
        job,
        ctx,
        ports=ports,
        run_dir=Path(run_dir),
        python=python,
        package_dirs=package_dirs,
        host_gpus=host_gpus() if gpus is None else gpus,
        max_restarts=max_restarts,
    )


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
) -> LocalJob:
    """Start `spec` as a local job and return at once. The job is PENDING while its packages install and
    its ports are reserved; a spec that cannot run locally makes it FAILED with the reason as its error."""
    reservation: list[PortReservation] = []

    def prepare() -> LaunchPlan:
        job = parse_job_spec(spec)
        package_dirs = install_packages(job, fetch_package, cache_dir or Path(run_dir) / "packages", install)
        reservation.append(reserve_ports(len(replica_slots(job))))
        return prepare_plan(
            spec,
            ctx,
            run_dir=run_dir,
            ports=reservation[0].ports,
            package_dirs=package_dirs,
            gpus=gpus,
            max_restarts=max_restarts,
        )

    def release() -> None:
        for held in reservation:
            held.release()

    return LocalJob(
        prepare, on_event=on_event, on_finish=release, grace_s=grace_s, settle_s=settle_s, timeout_s=timeout_s
    ).start()
