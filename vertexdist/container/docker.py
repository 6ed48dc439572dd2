"""`vertexdist build --local`: the docker CLI as a thin edge (argv built by pure functions).

The context goes to `docker build` as the same reproducible `.tar.gz` Cloud Build gets (on stdin, `-`),
so a local build sees exactly the files the content hash covers.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from vertexdist.errors import VertexdistError


def docker_daemon_answers(docker: str = "docker", timeout_s: float = 5.0) -> bool:
    """Whether a Docker daemon answers (the CLI alone is not enough to build)."""
    if shutil.which(docker) is None:
        return False
    try:
        result = subprocess.run(
            [docker, "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and bool(result.stdout.strip())


def docker_build_argv(
    image_uri: str,
    dockerfile: str,
    build_args: Mapping[str, str],
    *,
    docker: str = "docker",
) -> list[str]:
    """`docker build` reading the context tarball from stdin; `dockerfile` is its path inside the context."""
    argv = [docker, "build", "--file", dockerfile, "--tag", image_uri]
    for key in sorted(build_args):
        argv += ["--build-arg", f"{key}={build_args[key]}"]
    return [*argv, "-"]


def docker_push_argv(image_uri: str, *, docker: str = "docker") -> list[str]:
    return [docker, "push", image_uri]


def docker_image_exists_locally(image_uri: str, *, docker: str = "docker", timeout_s: float = 30.0) -> bool:
    """Whether the daemon already holds `image_uri` (a content-hashed tag is never rebuilt)."""
    try:
        result = subprocess.run(
            [docker, "image", "inspect", "--format", "{{.Id}}", image_uri],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


class DockerCliRunner:
    """Builds and pushes with the docker CLI, streaming its output to `log`."""

    def __init__(self, docker: str = "docker", log: Callable[[str], None] = print) -> None:
        self._docker = docker
        self._log = log

    def _run(self, argv: list[str], stdin_path: Path | None = None) -> None:
        self._log("$ " + " ".join(argv))
        with open(stdin_path, "rb") if stdin_path else open("/dev/null", "rb") as stdin:
            process = subprocess.Popen(
                argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            assert process.stdout is not None
            for line in process.stdout:
                self._log(line.rstrip("\n"))
            code = process.wait()
        if code != 0:
            raise VertexdistError(f"`{' '.join(argv[:2])}` failed with exit code {code}")

    def require_daemon(self) -> None:
        if not docker_daemon_answers(self._docker):
            raise VertexdistError(
                "no Docker daemon answers, so --local cannot build",
                hint="start Docker, or drop --local to build on Cloud Build",
            )

    def build(
        self, context_tar: Path, image_uri: str, dockerfile: str, build_args: Mapping[str, str]
    ) -> None:
        """`docker build`; where the Dockerfile's base image (a build argument) cannot be pulled, on the local
        stand-in instead (`vertexdist.container.standin`, said on one line)."""
        from vertexdist.container.standin import local_build_args

        text = dockerfile_in_tar(context_tar, dockerfile)
        args = local_build_args(text, build_args, docker=self._docker, log=self._log) if text else build_args
        self._run(docker_build_argv(image_uri, dockerfile, args, docker=self._docker), context_tar)

    def build_and_push(
        self, context_tar: Path, image_uri: str, dockerfile: str, build_args: Mapping[str, str]
    ) -> bool:
        """Build, then push; False (and no push) for an image built on the local stand-in base."""
        from vertexdist.container.standin import built_on_standin

        self.require_daemon()
        self.build(context_tar, image_uri, dockerfile, build_args)
        if built_on_standin(image_uri, self._docker):
            self._log(
                f"{image_uri} is built on the local stand-in base, so it is not pushed: it serves local runs "
                "(local-run --docker, the emulator) from this daemon"
            )
            return False
        self._run(docker_push_argv(image_uri, docker=self._docker))
        return True


def dockerfile_in_tar(context_tar: Path, dockerfile: str) -> str | None:
    """The Dockerfile's text from a build context `.tar.gz` (None where it is not in there)."""
    import tarfile

    with tarfile.open(context_tar, "r:gz") as tar:
        try:
            member = tar.extractfile(dockerfile.removeprefix("./"))
        except KeyError:
            return None
        return member.read().decode("utf-8", errors="replace") if member else None
