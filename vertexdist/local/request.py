"""The local backend's request: a typed job, its context and its launch plan, decided before anything runs.

`build_request` is what `LocalBackend.dryrun` returns and `schedule` runs (torchx's `PopenRequest` shape):
the plan names every replica's argv, env, folder and log; the packages it needs and the folders they install
into (keyed by digest, so known up front); the ports it holds, reserved so that no other local job takes them
between the dry run and the start. A `--docker` request runs the same job as containers instead.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertexdist.local.environment import JobContext, replica_slots
from vertexdist.local.gpus import host_gpus
from vertexdist.local.plan import DEFAULT_MAX_RESTARTS, LaunchPlan, build_plan
from vertexdist.local.ports import PortReservation, reserve_ports
from vertexdist.local.ray_check import require_ray
from vertexdist.local.requirements_env import RequirementsEnv, plan_env
from vertexdist.wire.job_spec import JobSpec, JobSpecError

if TYPE_CHECKING:
    from vertexdist.container.ensure import BuildPlan
    from vertexdist.local.docker_launcher import DockerSetup
    from vertexdist.local.runtime_containers import PulledImages


@dataclass(frozen=True)
class PackageInstall:
    """One `packageUris` entry: the sdist it names here, and the folder it is installed in (on PYTHONPATH)."""

    uri: str
    sdist: Path
    target: Path


@dataclass
class LocalRequest:
    """Everything `schedule` runs; `release()` gives back the ports of a request that will not run."""

    job: JobSpec
    ctx: JobContext
    plan: LaunchPlan
    installs: tuple[PackageInstall, ...] = ()
    # The job's own environment for its packages' requirements; None runs them with this interpreter.
    env: RequirementsEnv | None = None
    docker: DockerSetup | PulledImages | None = None
    ports: PortReservation | None = field(default=None, repr=False)
    display_name: str = ""

    @property
    def job_id(self) -> str:
        return self.ctx.job_id

    @property
    def run_dir(self) -> Path:
        return self.plan.run_dir

    def release(self) -> None:
        if self.ports is not None:
            self.ports.release()

    def to_dict(self) -> dict[str, Any]:
        """What `local-run --plan` prints: the plan, secrets masked; for `--docker` the containers too."""
        if self.docker is not None:
            return self.docker.plan.to_dict()
        return self.plan.to_dict()


def _installs(job: JobSpec, sdists: Mapping[str, Path], cache_dir: Path) -> tuple[PackageInstall, ...]:
    from vertexdist.packaging import install_dir

    found: dict[str, PackageInstall] = {}
    for pool in job.pools:
        for uri in pool.package_uris:
            if uri in found:
                continue
            if uri not in sdists:
                raise JobSpecError(f"{pool.name}: package {uri} was not fetched")
            found[uri] = PackageInstall(uri, Path(sdists[uri]), install_dir(Path(sdists[uri]), cache_dir))
    return tuple(found.values())


def build_request(
    job: JobSpec,
    ctx: JobContext,
    *,
    run_dir: Path,
    sdists: Mapping[str, Path],
    cache_dir: Path,
    gpus: Sequence[str] | None = None,
    python: str = sys.executable,
    max_restarts: int = DEFAULT_MAX_RESTARTS,
    display_name: str = "",
) -> LocalRequest:
    """The request for `job` with its replicas as processes on this host (ports reserved here)."""
    require_ray(job, python)
    installs = _installs(job, sdists, cache_dir)
    env = plan_env([item.sdist for item in installs], Path(cache_dir) / "envs", python)
    reservation = reserve_ports(len(replica_slots(job)))
    try:
        plan = build_plan(
            job,
            ctx,
            ports=reservation.ports,
            run_dir=Path(run_dir),
            python=str(env.python) if env else python,
            package_dirs={item.uri: str(item.target) for item in installs},
            host_gpus=host_gpus() if gpus is None else gpus,
            max_restarts=max_restarts,
        )
    except BaseException:
        reservation.release()
        raise
    return LocalRequest(job, ctx, plan, installs, env, ports=reservation, display_name=display_name)


def build_docker_request(
    job: JobSpec,
    ctx: JobContext,
    image_build: BuildPlan,
    *,
    run_dir: Path,
    gpus: Sequence[str] | None = None,
    max_restarts: int = DEFAULT_MAX_RESTARTS,
    display_name: str = "",
) -> LocalRequest:
    """The request for `job` with every replica a container of `image_build`'s image (needs no daemon yet)."""
    from vertexdist.local.docker_launcher import DockerSetup, caller_user, docker_job_plan

    plan = docker_job_plan(
        job,
        ctx,
        image_uri=image_build.image_uri,
        run_dir=Path(run_dir),
        host_gpus=host_gpus() if gpus is None else gpus,
        max_restarts=max_restarts,
        run_as=caller_user(),
    )
    setup = DockerSetup(plan, image_build, Path(run_dir), Path(ctx.gcs_root))
    return LocalRequest(job, ctx, plan.launch, docker=setup, display_name=display_name)
