"""A job's own Python environment for its packages' requirements, as a prebuilt training container has.

Vertex pip-installs `packageUris` with their dependencies in the container
(https://cloud.google.com/vertex-ai/docs/training/create-python-pre-built-container). Here the
dependencies go into a virtual environment of the job's own, never the one vertexdist runs in: created
from this interpreter, it sees this interpreter's packages (torch stays visible, and is not installed
twice) through a `.pth` file, behind its own. It is keyed by the requirement set (and the interpreter), so
a second job with the same requirements pays nothing. A package without requirements needs none of this.

Requirements are read from the package's metadata (PKG-INFO / egg-info `requires.txt` / a wheel's
METADATA) without running it; a package whose requirements its metadata leaves dynamic gets an
environment of its own, keyed by its digest, with the package installed into it with its dependencies.
pip reads its usual configuration (PIP_INDEX_URL, PIP_FIND_LINKS, pip.conf), so PyPI, a mirror or a local
folder of wheels all work.
"""

from __future__ import annotations

import contextlib
import email.parser
import fcntl
import hashlib
import os
import shutil
import site
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from vertexdist.errors import VertexdistError

MARKER = ".vertexdist-env-ready"
_PTH = "_vertexdist_parent_site.pth"
_PIP_TIMEOUT_S = 1800


class RequirementsError(VertexdistError):
    """A job's requirements could not be installed."""


@dataclass(frozen=True)
class RequirementsEnv:
    """The environment a job's replicas run in: where it is, and what goes into it."""

    path: Path
    requirements: tuple[str, ...]
    base_python: str = sys.executable  # the interpreter it is made from, whose packages it sees
    # sdists installed *with* their dependencies, for packages whose requirements are not known up front.
    packages: tuple[Path, ...] = ()

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def _metadata_requirements(text: str) -> tuple[str, ...] | None:
    message = email.parser.Parser().parsestr(text, headersonly=True)
    if "Requires-Dist" in [v.strip() for v in message.get_all("Dynamic") or []]:
        return None
    return tuple(str(r).strip() for r in message.get_all("Requires-Dist") or [])


def _requires_txt(text: str) -> tuple[str, ...]:
    """egg-info `requires.txt`: unconditional lines until the first `[extra]` section."""
    found: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            break
        if line and not line.startswith("#"):
            found.append(line)
    return tuple(found)


def _is_extra_only(requirement: str) -> bool:
    _name, _, marker = requirement.partition(";")
    return "extra" in marker


def _sdist_members(sdist: Path) -> dict[str, str]:
    """The metadata files of an sdist (tar.gz) or wheel (zip), by their path inside it."""
    wanted = ("PKG-INFO", "requires.txt", "METADATA")
    out: dict[str, str] = {}
    if zipfile.is_zipfile(sdist):
        with zipfile.ZipFile(sdist) as archive:
            for name in archive.namelist():
                if name.rsplit("/", 1)[-1] in wanted and name.count("/") <= 2:
                    out[name] = archive.read(name).decode("utf-8", "replace")
        return out
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name.rsplit("/", 1)[-1] in wanted and member.name.count("/") <= 2:
                handle = archive.extractfile(member)
                if handle is not None:
                    out[member.name] = handle.read().decode("utf-8", "replace")
    return out


def package_requirements(sdist: Path) -> tuple[str, ...] | None:
    """What installing `sdist` pulls in (extras left out); None when its metadata does not say."""
    try:
        members = _sdist_members(Path(sdist))
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise RequirementsError(f"cannot read the package {Path(sdist).name}: {exc}") from None
    found: tuple[str, ...] | None = None
    for name, text in sorted(members.items(), key=lambda kv: kv[0].count("/")):
        leaf = name.rsplit("/", 1)[-1]
        if leaf == "requires.txt" and name.count("/") == 2 and name.split("/")[1].endswith(".egg-info"):
            found = _requires_txt(text)
            break
        if leaf in ("PKG-INFO", "METADATA") and found is None:
            found = _metadata_requirements(text)
            if found is None:
                return None
    return tuple(r for r in found or () if not _is_extra_only(r))


def _python_identity(python: str) -> str:
    return f"{Path(python).resolve()}|{sys.version_info[:3]}|{sys.prefix}"


def plan_env(sdists: Sequence[Path], envs_dir: Path, python: str = sys.executable) -> RequirementsEnv | None:
    """The environment a job with these packages needs (pure but for reading their metadata), or None."""
    requirements: set[str] = set()
    dynamic: list[Path] = []
    for sdist in sdists:
        found = package_requirements(sdist)
        if found is None:
            dynamic.append(Path(sdist))
        else:
            requirements.update(found)
    if not requirements and not dynamic:
        return None
    digests = sorted(hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in dynamic)
    key_text = "\n".join([_python_identity(python), *sorted(requirements), *digests])
    key = hashlib.sha256(key_text.encode()).hexdigest()[:16]
    return RequirementsEnv(Path(envs_dir) / key, tuple(sorted(requirements)), python, tuple(dynamic))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_AUTOLOG_HINT = (
    "google-cloud-aiplatform[autologging] is what CustomJob.from_local_script(enable_autolog=True) requires:"
    " it pulls in MLflow, which the replica's aiplatform.autolog() needs; make an mlflow wheel reachable"
    " to pip (PIP_FIND_LINKS, PIP_INDEX_URL), or install mlflow beside vertexdist (the job sees its packages)"
)
_DEFAULT_HINT = (
    "the prebuilt container installs the same requirements; check their names and versions,"
    " and that pip can reach an index (PIP_INDEX_URL, PIP_FIND_LINKS)"
)


def install_hint(wanted: Sequence[str]) -> str:
    """What to do when installing `wanted` failed: the SDK's autolog dependency gets its own advice."""
    if any(w.replace(" ", "").startswith("google-cloud-aiplatform[autologging]") for w in wanted):
        return _AUTOLOG_HINT
    return _DEFAULT_HINT


def _run(argv: list[str], what: str, hint: str = _DEFAULT_HINT) -> None:
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        timeout=_PIP_TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-8:])
        raise RequirementsError(
            f"{what} failed:\n{tail}",
            hint=hint,
        )


def _site_packages(env: Path) -> Path:
    return env / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def ensure_env(env: RequirementsEnv) -> Path:
    """Create `env` unless it is ready (one creator at a time; a half-made one is made again)."""
    python = env.base_python
    if (env.path / MARKER).is_file():
        return env.path
    with _locked(env.path):
        if (env.path / MARKER).is_file():
            return env.path
        shutil.rmtree(env.path, ignore_errors=True)
        _run(
            [python, "-m", "venv", "--system-site-packages", "--without-pip", str(env.path)],
            "creating the job env",
        )
        parent_sites = [p for p in site.getsitepackages() if Path(p).is_dir()]
        (_site_packages(env.path) / _PTH).write_text("".join(f"{p}\n" for p in parent_sites))
        wanted = [*env.requirements, *(str(p) for p in env.packages)]
        _run(
            [python, "-m", "pip", "--python", str(env.python), "install", "--quiet", "--no-compile", *wanted],
            "installing the job's requirements (" + ", ".join(wanted)[:300] + ")",
            install_hint(wanted),
        )
        (env.path / MARKER).write_text("\n".join(wanted) + "\n")
    return env.path
