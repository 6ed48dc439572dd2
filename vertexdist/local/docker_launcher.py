"""The local backend's second launcher (`local-run --docker`): the same launch plan, each replica a container.

The replicas share one user-defined bridge network named after the job, where each container's host name is
its replica name (`workerpool0-0`), so CLUSTER_SPEC, TF_CONFIG and MASTER_ADDR name `workerpoolP-I:2222` as
on Vertex (docs/reference/vertex.md §1). The run folder's `gcs/` is mounted at `/gcs`, where Vertex mounts
every bucket, and at `/vertexdist/gcs`, where the replicas' VERTEXDIST_GCS_ROOT points. Reduction-server
replicas run the local stand-in inside the job's image (the real reduction-server image needs GPUs and
Google's NCCL plugin), so their host names resolve.

`docker_job_plan` is pure (what `--plan --docker` prints, no daemon needed); `DockerSetup` holds the edges
the runner calls around the plan: build the image unless its tag is present and create the network while
the job is PENDING, remove the network at the end (the runner ends each container with `docker rm -f`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vertexdist.container.docker import DockerCliRunner, docker_image_exists_locally
from vertexdist.container.ensure import BuildPlan
from vertexdist.errors import VertexdistError
from vertexdist.local.docker_argv import (
    docker_gpus_value,
    docker_network_create_argv,
    docker_network_rm_argv,
    docker_rm_force_argv,
    docker_run_argv,
)
from vertexdist.local.environment import VERTEX_CLUSTER_PORT, JobContext, replica_slots
from vertexdist.local.plan import DEFAULT_MAX_RESTARTS, STANDIN_CODE, LaunchPlan, build_plan
from vertexdist.wire.job_spec import JobSpec

CONTAINER_GCS_ROOT = "/vertexdist/gcs"
GCS_MOUNT = "/gcs"


@dataclass(frozen=True)
class DockerJobPlan:
    """The containers of one job and the network around them; nothing started yet."""

    image_uri: str
    network: str
    launch: LaunchPlan
    setup: tuple[tuple[str, ...], ...]
    teardown: tuple[tuple[str, ...], ...]

    def to_dict(self, *, masked: bool = True) -> dict[str, Any]:
        return {
            **self.launch.to_dict(masked=masked),
            "docker": {
                "image": self.image_uri,
                "network": self.network,
                "setup": [list(argv) for argv in self.setup],
                "teardown": [list(argv) for argv in self.teardown],
            },
        }


def container_name(job_id: str, replica: str) -> str:
    return f"{job_id}-{replica}"


def caller_user() -> str:
    """`UID:GID` of this process: replicas writing the mounted run folder leave files the caller owns."""
    return f"{os.getuid()}:{os.getgid()}"


def docker_job_plan(
    job: JobSpec,
    ctx: JobContext,
    *,
    image_uri: str,
    run_dir: Path,
    host_gpus: Sequence[str] = (),
    max_restarts: int = DEFAULT_MAX_RESTARTS,
    docker: str = "docker",
    run_as: str | None = None,
    extra_env: Mapping[str, str] | None = None,
    read_only: Sequence[str] = (),
) -> DockerJobPlan:
    """One `docker run` per replica (pure): Vertex's addresses by host name, the gcs root mounted, each
    replica's share of the host GPUs given with `--gpus` (inside, the container numbers them from 0);
    `run_as` (`UID:GID`, see `caller_user`) is the user the replicas run as; `extra_env` goes to every
    replica beneath the job's own variables, and `read_only` host folders are mounted at the same paths."""
    for pool in job.pools:
        if pool.kind == "python_package":
            raise VertexdistError(
                f"{pool.name} runs a Python package, which --docker cannot run in a container",
                hint="drop --docker to run the job's replicas on the host",
            )
    network = ctx.job_id
    inside = build_plan(
        job,
        replace(ctx, gcs_root=CONTAINER_GCS_ROOT),
        ports=(),
        run_dir=run_dir,
        python="python",
        package_dirs={},
        host_gpus=host_gpus,
        max_restarts=max_restarts,
        addressing="hostnames",
    )
    launches = []
    for launch, slot in zip(inside.replicas, replica_slots(job), strict=True):
        env = {**(extra_env or {}), **launch.env}
        devices = env.pop("CUDA_VISIBLE_DEVICES", None)
        env["PYTHONUNBUFFERED"] = "1"
        command: tuple[str, ...]
        if slot.pool.kind == "reduction_server":
            image, command = image_uri, ("python", "-c", STANDIN_CODE)
            args: tuple[str, ...] = ("0.0.0.0", str(VERTEX_CLUSTER_PORT), slot.name)
        else:
            image, command, args = slot.pool.image_uri or image_uri, slot.pool.command, slot.pool.args
        name = container_name(ctx.job_id, slot.name)
        argv = docker_run_argv(
            image,
            name=name,
            network=network,
            hostname=slot.name,
            env=env,
            command=command or None,
            args=args,
            gpus=docker_gpus_value(devices) if devices else None,
            # Where VERTEXDIST_GCS_ROOT points, and where Vertex's Cloud Storage FUSE is: /gcs/BUCKET/...
            mounts=[(ctx.gcs_root, CONTAINER_GCS_ROOT), (ctx.gcs_root, GCS_MOUNT)],
            read_only=read_only,
            docker=docker,
            init=True,
            env_from_client=True,
            # The image's own user would write the mounted run folder as another uid than the caller's.
            user=run_as,
        )
        launches.append(
            replace(
                launch,
                kind="container",
                argv=tuple(argv),
                env=env,
                stop_argv=tuple(docker_rm_force_argv(name, docker=docker)),
            )
        )
    return DockerJobPlan(
        image_uri=image_uri,
        network=network,
        launch=replace(inside, replicas=tuple(launches), gcs_root=None),  # each container mounts it
        setup=(tuple(docker_network_create_argv(network, docker=docker)),),
        teardown=(tuple(docker_network_rm_argv(network, docker=docker)),),
    )


def ensure_local_image(plan: BuildPlan, runner: DockerCliRunner, *, docker: str = "docker") -> bool:
    """Build the image from the deterministic context unless the daemon has its tag; True if built."""
    from vertexdist.container.ensure import packed_context

    if docker_image_exists_locally(plan.image_uri, docker=docker):
        return False
    with packed_context(plan) as tar_path:
        runner.build(tar_path, plan.image_uri, plan.context.dockerfile, plan.build_args)
    return True


def _run_docker(argv: Sequence[str], log: Callable[[str], None]) -> subprocess.CompletedProcess[str]:
    log("$ " + " ".join(argv))
    result = subprocess.run(list(argv), capture_output=True, text=True, timeout=120, check=False)
    for line in (result.stdout + result.stderr).splitlines():
        log(line)
    return result


@dataclass(frozen=True)
class DockerSetup:
    """What runs around a docker job's plan: the image and network before it, the network's removal after.

    Both run in the job's supervisor thread; `prepare` while the job is PENDING (its output goes to
    `logs/build.log`), so a failed build fails the job with the reason.
    """

    plan: DockerJobPlan
    image_build: BuildPlan
    run_dir: Path
    gcs_root: Path
    docker: str = "docker"

    @property
    def build_log(self) -> Path:
        return self.run_dir / "logs" / "build.log"

    def _log(self, line: str) -> None:
        with open(self.build_log, "a", encoding="utf-8") as out:
            out.write(line + "\n")

    def prepare(self) -> None:
        self.build_log.parent.mkdir(parents=True, exist_ok=True)
        if not ensure_local_image(
            self.image_build, DockerCliRunner(self.docker, log=self._log), docker=self.docker
        ):
            self._log(f"{self.image_build.image_uri} exists; nothing to build")
        # Owned by the user before docker would create it as root for the mount.
        self.gcs_root.mkdir(parents=True, exist_ok=True)
        for argv in self.plan.setup:
            if _run_docker(argv, self._log).returncode != 0:
                raise VertexdistError(f"`{' '.join(argv)}` failed", hint=f"see {self.build_log}")

    def finish(self) -> None:
        for argv in self.plan.teardown:
            _run_docker(argv, self._log)
