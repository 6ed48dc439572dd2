"""The docker CLI command lines that run a local job's replicas as containers (`local-run --docker`). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def docker_network_create_argv(network: str, *, docker: str = "docker") -> list[str]:
    """A user-defined bridge network, where containers find each other by hostname (`local-run --docker`)."""
    return [docker, "network", "create", "--driver", "bridge", network]


def docker_run_argv(
    image_uri: str,
    *,
    name: str,
    network: str,
    hostname: str,
    env: Mapping[str, str],
    command: Sequence[str] | None = None,
    args: Sequence[str] = (),
    gpus: str | None = None,
    mounts: Sequence[tuple[str, str]] = (),
    read_only: Sequence[str] = (),
    docker: str = "docker",
    init: bool = False,
    env_from_client: bool = False,
    user: str | None = None,
) -> list[str]:
    """One replica as a container, Vertex-style: `command` replaces ENTRYPOINT (and drops CMD) as
    `containerSpec.command` does; `hostname` (e.g. `workerpool0-0`) is what CLUSTER_SPEC names it by.

    `init` runs a tiny init as PID 1, so the SIGTERM the client proxies reaches the trainer (a process
    that is PID 1 ignores signals it has no handler for). `env_from_client` passes `--env KEY` without
    the value, so docker copies it from the client's own environment and no secret shows in `ps`.
    `user` (`UID:GID`) runs the process as that user, so files it writes into mounts stay the caller's.
    `read_only` folders of this host are mounted read-only at the same paths.
    """
    argv = [docker, "run", "--rm", "--name", name, "--network", network, "--hostname", hostname]
    argv += ["--network-alias", hostname]
    if init:
        argv.append("--init")
    if user:
        argv += ["--user", user]
    for key in sorted(env):
        argv += ["--env", key if env_from_client else f"{key}={env[key]}"]
    for host_path, container_path in mounts:
        argv += ["--volume", f"{host_path}:{container_path}"]
    for folder in read_only:
        argv += ["--volume", f"{folder}:{folder}:ro"]
    if gpus:
        argv += ["--gpus", gpus]
    tail = list(args)
    if command:
        argv += ["--entrypoint", command[0]]
        tail = [*command[1:], *args]
    return [*argv, image_uri, *tail]


def docker_network_rm_argv(network: str, *, docker: str = "docker") -> list[str]:
    return [docker, "network", "rm", network]


def docker_rm_force_argv(name: str, *, docker: str = "docker") -> list[str]:
    """Kill and remove a container by name: what stops a replica whose `docker run` client is gone."""
    return [docker, "rm", "--force", name]


def docker_gpus_value(devices: str) -> str:
    """`--gpus` for a CUDA_VISIBLE_DEVICES-style list; the quotes keep docker's CSV parser from splitting
    `device=0,1` at the comma."""
    return f'"device={devices}"'
