"""A received job's container pools run as containers when docker or podman answers (the emulator's way).

The same containers as `local-run --docker` (`docker_launcher.docker_job_plan`: a network per job, replicas
by host name), with each pool's own image pulled unless present instead of built, and the job's Cloud
Storage folder mounted at `/gcs` as well, where Vertex mounts every bucket. An image without a command runs
its ENTRYPOINT, as on Vertex. The emulator's pip settings go in too (`container_pip`), as host-mode jobs
inherit them. Without a runtime, or with an image this machine cannot get, the pools run on
this host as before (`isolated_container`); `container_mode` is the line the emulator starts with.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from vertexdist.container.docker import docker_daemon_answers, docker_image_exists_locally
from vertexdist.errors import VertexdistError
from vertexdist.local.container_pip import ContainerPip, container_pip
from vertexdist.local.docker_launcher import DockerJobPlan, docker_job_plan
from vertexdist.local.environment import JobContext
from vertexdist.local.plan import DEFAULT_MAX_RESTARTS
from vertexdist.local.request import LocalRequest
from vertexdist.wire.job_spec import JobSpec

RUNTIMES = ("docker", "podman")


def container_runtime() -> str | None:
    """The first container CLI whose daemon (or service) answers, or None."""
    return next((name for name in RUNTIMES if docker_daemon_answers(name)), None)


def runs_in_runtime(job: JobSpec) -> bool:
    """Whether every pool can be a container (python-package pools need this host's installs)."""
    return any(p.kind == "container" for p in job.pools) and all(
        p.kind != "python_package" for p in job.pools
    )


def job_images(job: JobSpec) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p.image_uri for p in job.pools if p.kind == "container" and p.image_uri))


def image_available(image: str, runtime: str) -> bool:
    """Whether the runtime has `image`, or can pull it now (a registry this machine reaches)."""
    if docker_image_exists_locally(image, docker=runtime):
        return True
    try:
        pulled = subprocess.run(
            [runtime, "pull", "--quiet", image], capture_output=True, timeout=1800, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return pulled.returncode == 0


def runtime_for(job: JobSpec) -> tuple[str | None, str]:
    """The runtime that runs `job`'s container pools, or None and why they run on this host instead ("" for a
    job that has no container pool to run in one). Every image must be in the runtime or pullable: an image
    this machine cannot get runs its command on the host, as without a runtime."""
    if not runs_in_runtime(job):
        return None, ""
    runtime = container_runtime()
    if runtime is None:
        return (
            None,
            "no Docker daemon (nor podman) answers, so the container pools run on this host, isolated",
        )
    missing = [image for image in job_images(job) if not image_available(image, runtime)]
    if missing:
        return None, (
            f"{', '.join(missing)}: not in {runtime}'s images and cannot be pulled here, so the container "
            "pools run on this host, isolated"
        )
    return runtime, ""


def container_mode() -> str:
    """What the emulator says when it starts: where its container jobs will run."""
    runtime = container_runtime()
    if runtime is None:
        return "no Docker daemon (nor podman) answers: container jobs run on this host, isolated"
    return f"container jobs run in {runtime}'s containers (an image it cannot get runs here, isolated)"


def runtime_job_plan(
    job: JobSpec,
    ctx: JobContext,
    run_dir: Path,
    runtime: str,
    max_restarts: int = DEFAULT_MAX_RESTARTS,
    pip: ContainerPip | None = None,
) -> DockerJobPlan:
    """`docker_job_plan` of the pools' own images, `/gcs` mounted as there (pure); `pip` is this machine's
    pip settings (`container_pip`), which host-mode jobs inherit.

    A root caller runs them as root, since the mounted storage folder is private to its owner and an image's
    own user (the repository's Dockerfile has uid 10001) could not write outputs into it; any other caller
    keeps the image's own user, as on Vertex (`pip install --user` needs its HOME)."""
    image = next(p.image_uri for p in job.pools if p.kind == "container" and p.image_uri)
    return docker_job_plan(
        job,
        ctx,
        image_uri=image,
        run_dir=run_dir,
        max_restarts=max_restarts,
        docker=runtime,
        run_as="0:0" if os.geteuid() == 0 else None,
        extra_env=pip.env if pip else None,
        read_only=pip.folders if pip else (),
    )


@dataclass(frozen=True)
class PulledImages:
    """What runs around a runtime job's plan: pull missing images and make the network; remove it after."""

    plan: DockerJobPlan
    images: tuple[str, ...]
    gcs_root: Path
    docker: str = "docker"

    def prepare(self) -> None:
        self.gcs_root.mkdir(parents=True, exist_ok=True)
        for image in self.images:
            if not docker_image_exists_locally(image, docker=self.docker):
                self._run([self.docker, "pull", image], timeout=1800)
        for argv in self.plan.setup:
            self._run(list(argv))

    def finish(self) -> None:
        for argv in self.plan.teardown:
            subprocess.run(list(argv), capture_output=True, timeout=120, check=False)

    @staticmethod
    def _run(argv: list[str], timeout: float = 120) -> None:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if result.returncode != 0:
            raise VertexdistError(
                f"`{' '.join(argv)}` failed: {(result.stderr or result.stdout).strip()[-500:]}"
            )


def runtime_request(
    job: JobSpec, ctx: JobContext, run_dir: Path, runtime: str, max_restarts: int
) -> LocalRequest:
    """The LocalRequest that runs `job`'s pools as containers of their own images."""
    plan = runtime_job_plan(job, ctx, run_dir, runtime, max_restarts, pip=container_pip(os.environ))
    images = job_images(job)
    setup = PulledImages(plan, images, Path(ctx.gcs_root), runtime)
    return LocalRequest(job, ctx, plan.launch, docker=setup)
