"""Run a container's process on the host, without Docker: what `local-run` does for a template with `build`.

The image runs `ENTRYPOINT` + `CMD` of the Dockerfile's last stage, with the context's code on the Python
path. On the host the same command runs from the build context folder itself: `python` becomes the
current interpreter, `PYTHONPATH` points at the context, and the Dockerfile's plain `ENV` values are
kept (paths inside the image, such as PATH or PYTHONPATH, are not). Vertex's `containerSpec.command`
replaces ENTRYPOINT and `containerSpec.args` replaces CMD, as `docker run --entrypoint` and arguments do.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vertexdist.errors import VertexdistError
from vertexdist.shipped import LAUNCHER_DIR, LAUNCHER_PACKAGE

# Values that name places inside the image; the host has its own.
_IMAGE_ONLY_ENV = frozenset({"PATH", "PYTHONPATH", "HOME", "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONHOME"})


@dataclass(frozen=True)
class DockerfileProcess:
    """What the last stage of a Dockerfile runs: exec-form lists (shell form becomes `/bin/sh -c`)."""

    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str | None = None


def _logical_lines(text: str) -> list[str]:
    """Instructions with `\\` continuations joined and comments dropped."""
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    if current.strip():
        lines.append(current)
    return lines


def _command(value: str) -> tuple[str, ...]:
    value = value.strip()
    if value.startswith("["):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, list) and all(isinstance(v, str) for v in parsed):
            return tuple(parsed)
    return ("/bin/sh", "-c", value)


def _env_pairs(value: str) -> dict[str, str]:
    words = shlex.split(value)
    if len(words) >= 2 and "=" not in words[0]:  # legacy `ENV KEY value with spaces`
        return {words[0]: value.split(None, 1)[1].strip()}
    return dict(w.split("=", 1) for w in words if "=" in w)


def parse_dockerfile(text: str) -> DockerfileProcess:
    """ENTRYPOINT, CMD, ENV and WORKDIR of the last stage (pure)."""
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: dict[str, str] = {}
    workdir: str | None = None
    for line in _logical_lines(text):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            entrypoint, cmd, env, workdir = (), (), {}, None
        elif keyword == "ENTRYPOINT":
            entrypoint = _command(rest)
            cmd = ()  # Docker resets CMD when ENTRYPOINT is set in the same stage
        elif keyword == "CMD":
            cmd = _command(rest)
        elif keyword == "ENV":
            env.update(_env_pairs(rest))
        elif keyword == "WORKDIR":
            workdir = rest.strip()
    return DockerfileProcess(entrypoint, cmd, env, workdir)


@dataclass(frozen=True)
class HostCommand:
    """argv, extra environment and working folder for one replica run on the host."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path


def host_command(
    process: DockerfileProcess,
    context_root: Path,
    *,
    command: Sequence[str] | None = None,
    args: Sequence[str] | None = None,
    python: str = sys.executable,
    inherited_pythonpath: str | None = None,
) -> HostCommand:
    """The host equivalent of running the image with Vertex's `containerSpec` `command`/`args` (pure)."""
    if command:
        argv = list(command) + list(args or ())
    else:
        argv = list(process.entrypoint) + (list(args) if args else list(process.cmd))
    if not argv:
        raise VertexdistError(
            "the Dockerfile has no ENTRYPOINT or CMD and the job gives no command",
            hint='add ENTRYPOINT ["python", "-m", "your_package.task"] to the Dockerfile',
        )
    if Path(argv[0]).name in ("python", "python3") or Path(argv[0]).name.startswith("python3."):
        argv[0] = python
    env = {k: v for k, v in process.env.items() if k not in _IMAGE_ONLY_ENV and "$" not in v}
    root = str(context_root.resolve())
    if argv[1:3] == ["-m", LAUNCHER_PACKAGE]:
        # The image has the launcher beside the code (the Dockerfile copies it); here vertexdist has it.
        root += os.pathsep + str(LAUNCHER_DIR.parent)
    env["PYTHONPATH"] = root + (os.pathsep + inherited_pythonpath if inherited_pythonpath else "")
    return HostCommand(argv, env, context_root.resolve())


def host_command_for_build(
    context: Path,
    dockerfile: Path,
    *,
    command: Sequence[str] | None = None,
    args: Sequence[str] | None = None,
    python: str = sys.executable,
) -> HostCommand:
    """Read the Dockerfile and map it to a host command (the file-reading edge of `host_command`)."""
    try:
        text = dockerfile.read_text(encoding="utf-8")
    except OSError as exc:
        raise VertexdistError(f"cannot read the Dockerfile {str(dockerfile)!r}: {exc.strerror}") from None
    return host_command(parse_dockerfile(text), context, command=command, args=args, python=python)


def host_job_spec(
    spec: Mapping[str, Any],
    *,
    image_uri: str,
    context: Path,
    dockerfile: Path,
    python: str = sys.executable,
) -> dict[str, Any]:
    """A rendered CustomJobSpec whose pools running `image_uri` run on the host instead (pure but for
    reading the Dockerfile): `containerSpec.command` becomes the host argv (ENTRYPOINT, or the job's own
    command, with `python` as this interpreter; CMD too when the job gives no args), and the env gets
    the context on PYTHONPATH plus the Dockerfile's plain ENV, under the job's own env (which wins, as
    it does over an image's ENV). Other pools, such as reduction servers, are left as they are.
    """
    text = dockerfile.read_text(encoding="utf-8")
    process = parse_dockerfile(text)
    result = copy.deepcopy(dict(spec))
    for pool in result.get("workerPoolSpecs", []):
        container = pool.get("containerSpec") if isinstance(pool, dict) else None
        if not container or container.get("imageUri") != image_uri:
            continue
        args = list(container.get("args") or [])
        run = host_command(process, context, command=container.get("command"), args=args, python=python)
        container["command"] = run.argv[: len(run.argv) - len(args)] if args else run.argv
        own = {e["name"]: e["value"] for e in container.get("env") or []}
        merged = {**run.env, **own}
        container["env"] = [{"name": k, "value": v} for k, v in merged.items()]
    return result
