"""A container pool's command run without a container runtime, isolated from the host it runs on.

Vertex runs `containerSpec.command` inside the image, where `pip install --user ...` or
`pip install --upgrade pip` change nothing but the container (the SDK's `CustomJob.from_local_script` with a
custom image runs exactly that). Without docker or podman the command runs on the host, so each replica gets
an environment of its own in the job's folder: a virtual environment made from this interpreter that sees its
packages (as an image would have them) but installs into itself; `pip`, `pip3`, `python`, `python3` first
on PATH; HOME, PYTHONUSERBASE (where `--user` installs go; the environment includes the system site, so pip
accepts `--user` and Python imports from it), the caches and TMPDIR in the replica's folder; byte code
written there too. `/gcs/BUCKET/...` paths (Vertex's Cloud Storage FUSE mount) are mapped to the job's local
Cloud Storage folder. An image whose command is its ENTRYPOINT cannot run without a runtime: a clear error.
"""

from __future__ import annotations

import re
import site
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from vertexdist.errors import VertexdistError
from vertexdist.local.plan import LaunchPlan, ReplicaLaunch

# `/gcs/` at the start of a word (argv item, shell word, `--flag=/gcs/...`), not inside another path.
_GCS_PATH = re.compile(r"(?<![\w./-])/gcs/")
_GCS_OBJECT = re.compile(r"(?<![\w./-])/gcs/([a-z0-9][a-z0-9._-]{0,221})/([^\s'\";&|()<>]+)")
_PYTHON_NAME = re.compile(r"^python(3(\.\d+)?)?$")
_PTH = "_vertexdist_image_site.pth"
_PIP_WRAPPER = '#!/bin/sh\nexec "{python}" -m pip "$@"\n'


class NoContainerRuntime(VertexdistError):
    """A container pool needs a container runtime to run."""


def gcs_objects(argv: Iterable[str]) -> list[str]:
    """`gs://B/O` for every `/gcs/B/O` path the command names, in order, once each (pure)."""
    found: dict[str, None] = {}
    for word in argv:
        for match in _GCS_OBJECT.finditer(word):
            found[f"gs://{match.group(1)}/{match.group(2)}"] = None
    return list(found)


def map_gcs_paths(word: str, gcs_root: Path) -> str:
    """`/gcs/B/O` -> `<gcs_root>/B/O` wherever a word names the mount (pure)."""
    return _GCS_PATH.sub(str(gcs_root).rstrip("/") + "/", word)


def replica_sandbox(run_dir: Path, replica: str) -> Path:
    return run_dir / "containers" / replica


def isolated_replica(launch: ReplicaLaunch, sandbox: Path, gcs_root: Path, host_path: str) -> ReplicaLaunch:
    """The replica's command and environment, run in `sandbox` instead of its image (pure)."""
    if not launch.argv:
        raise NoContainerRuntime(
            f"{launch.name}: the containerSpec gives no command, so the image's ENTRYPOINT would run it;"
            " without docker or podman answering, the emulator cannot run an image",
            hint="start docker (or podman), or give containerSpec.command",
        )
    env_bin = sandbox / "env" / "bin"
    argv = [map_gcs_paths(word, gcs_root) for word in launch.argv]
    if _PYTHON_NAME.match(Path(argv[0]).name):
        argv[0] = str(env_bin / "python")
    home = sandbox / "home"
    env = {
        **{k: map_gcs_paths(v, gcs_root) for k, v in launch.env.items()},
        "PATH": f"{env_bin}:{host_path}",
        "VIRTUAL_ENV": str(sandbox / "env"),
        "HOME": str(home),
        "PYTHONUSERBASE": str(sandbox / "user"),
        "PYTHONPYCACHEPREFIX": str(sandbox / "pycache"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "TMPDIR": str(sandbox / "tmp"),
    }
    return replace(launch, argv=tuple(argv), env=env)


def isolated_plan(plan: LaunchPlan, gcs_root: Path, host_path: str) -> LaunchPlan:
    """`plan` with every container replica isolated (pure); other replicas are left as they are."""
    replicas = tuple(
        isolated_replica(r, replica_sandbox(plan.run_dir, r.name), gcs_root, host_path)
        if r.kind == "container"
        else r
        for r in plan.replicas
    )
    return replace(plan, replicas=replicas)


def make_sandboxes(plan: LaunchPlan, python: str = sys.executable) -> None:
    """Create each container replica's environment and folders (an edge: runs `python -m venv`)."""
    for replica in plan.replicas:
        if replica.kind != "container":
            continue
        sandbox = replica_sandbox(plan.run_dir, replica.name)
        env = sandbox / "env"
        if not (env / "bin" / "python").exists():
            _venv(env, python)
        for folder in ("home", "user", "pycache", "tmp"):
            (sandbox / folder).mkdir(parents=True, exist_ok=True)


def _venv(env: Path, python: str) -> None:
    result = subprocess.run(
        [python, "-m", "venv", "--system-site-packages", "--without-pip", str(env)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise VertexdistError(f"creating a container replica's environment failed: {result.stderr[-500:]}")
    site_dir = next((env / "lib").glob("python*/site-packages"))
    # What the image would hold (this interpreter's packages: pip, torch), behind the replica's own.
    parents: Sequence[str] = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (site_dir / _PTH).write_text("".join(f"{p}\n" for p in parents))
    for name in ("pip", "pip3"):
        wrapper = env / "bin" / name
        wrapper.write_text(_PIP_WRAPPER.format(python=env / "bin" / "python"))
        wrapper.chmod(0o755)
