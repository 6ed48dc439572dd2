"""The local stand-in for Vertex's prebuilt training images, for `docker` builds that cannot pull them.

Vertex's prebuilt PyTorch images (`us-docker.pkg.dev/vertex-ai/training/...`) need a route to that registry;
an offline machine has none. There, a local build (`build --local`, `local-run --docker`, the emulator's
container jobs) builds the template's Dockerfile on a stand-in instead: Debian bookworm's Python 3.11 with a
virtual environment holding torch's CPU build of the line vertexdist develops with, made only from Debian's
packages (`debootstrap`, as root) and the package index. It is said on one line, and an image built on it is
labelled so and never pushed (`vertexdist.base-standin`).

Only a Dockerfile whose first `FROM` names a build argument (`ARG BASE_IMAGE=...` then `FROM ${BASE_IMAGE}`,
as the repository's Dockerfile does) can be given the stand-in; a literal `FROM` is left to docker.

`base_image_arg` is pure; `local_build_args` and `ensure_standin` are the docker and debootstrap edges.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from vertexdist.errors import VertexdistError

PYTHON_LINE = "3.11"  # Debian bookworm's python3
TORCH_VERSION = "2.13.0"  # the torch line vertexdist develops and tests with (CPU build)
DEBIAN_SUITE = "bookworm"
OS_IMAGE = f"vertexdist-standin/debian-python:{DEBIAN_SUITE}"
# The last part is the stand-in's own revision: a change to STANDIN_DOCKERFILE bumps it, so every daemon
# makes the new one instead of keeping the old under the same tag.
STANDIN_REVISION = 2
_PY_TAG = "py" + PYTHON_LINE.replace(".", "")
STANDIN_IMAGE = f"vertexdist-standin/pytorch-cpu:{_PY_TAG}-torch{TORCH_VERSION}-r{STANDIN_REVISION}"
STANDIN_LABEL = "vertexdist.base-standin"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")

_FROM = re.compile(r"^FROM\s+(?:--platform=\S+\s+)?(\S+)", re.IGNORECASE)
_ARG = re.compile(r"^ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(\S*))?\s*$", re.IGNORECASE)
_REF = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")

_CA_COPY = "COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt\n"
STANDIN_DOCKERFILE = f"""\
FROM {OS_IMAGE}
# The host's CA bundle: the package index is reached through whatever TLS the host trusts.
{_CA_COPY}COPY wheels/ /tmp/wheels/
ENV VIRTUAL_ENV=/opt/venv \\
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \\
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \\
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \\
    PIP_DISABLE_PIP_VERSION_CHECK=1
# The system site too, as the conda or system Python of Vertex's images: `pip install --user` (which the SDK's
# `from_local_script` runs in a custom image) is refused by a virtual environment that hides it.
RUN python3 -m venv --system-site-packages /opt/venv \\
    && pip install --no-cache-dir {{torch_source}} "torch=={TORCH_VERSION}" numpy \\
    && rm -rf /tmp/wheels
LABEL {STANDIN_LABEL}="{STANDIN_IMAGE}"
"""


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append((pending + stripped).strip())
        pending = ""
    if pending.strip():
        lines.append(pending.strip())
    return lines


def base_image_arg(dockerfile_text: str, build_args: Mapping[str, str]) -> tuple[str, str] | None:
    """(argument name, image) when the first `FROM` names a build argument, with the image it resolves to
    (the build args' value, else the `ARG` default); None for a literal `FROM` or an argument without a
    value."""
    defaults: dict[str, str] = {}
    for line in _logical_lines(dockerfile_text):
        arg = _ARG.match(line)
        if arg:
            defaults[arg.group(1)] = arg.group(2) or ""
            continue
        found = _FROM.match(line)
        if found:
            ref = _REF.match(found.group(1))
            if ref is None:
                return None
            name = ref.group(1)
            image = build_args.get(name) or defaults.get(name, "")
            return (name, image) if image else None
    return None


def _docker(argv: list[str], *, timeout: float, stdin: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, stdin=stdin)


def image_present(image: str, docker: str = "docker") -> bool:
    return _docker([docker, "image", "inspect", "--format", "{{.Id}}", image], timeout=60).returncode == 0


def can_pull(image: str, docker: str = "docker") -> bool:
    try:
        return _docker([docker, "pull", "--quiet", image], timeout=600).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def built_on_standin(image: str, docker: str = "docker") -> bool:
    """Whether a local image was built on the stand-in (its label says so)."""
    result = _docker(
        [docker, "image", "inspect", "--format", f'{{{{index .Config.Labels "{STANDIN_LABEL}"}}}}', image],
        timeout=60,
    )
    return result.returncode == 0 and result.stdout.strip() not in ("", "<no value>")


def local_build_args(
    dockerfile_text: str,
    build_args: Mapping[str, str],
    *,
    docker: str = "docker",
    log: Callable[[str], None] = print,
) -> dict[str, str]:
    """The build args for a local build: the template's, or with the stand-in as its base image where that
    image is neither in the daemon nor pullable (said on one line)."""
    args = dict(build_args)
    found = base_image_arg(dockerfile_text, build_args)
    if found is None:
        return args
    name, image = found
    if image == STANDIN_IMAGE or image_present(image, docker) or can_pull(image, docker):
        return args
    log(
        f"{image} cannot be pulled here; building on the local stand-in {STANDIN_IMAGE} "
        f"(Debian {DEBIAN_SUITE}, Python {PYTHON_LINE}, torch {TORCH_VERSION} CPU; never pushed)"
    )
    ensure_standin(docker=docker, log=log)
    args[name] = STANDIN_IMAGE
    return args


def _torch_wheels() -> list[Path]:
    """Local torch wheels for the stand-in's Python (pip's find-links folders), so no GBs are downloaded."""
    folders = [Path(p) for p in os.environ.get("PIP_FIND_LINKS", "/opt/wheels").split() if p]
    tag = "cp" + PYTHON_LINE.replace(".", "")
    found: list[Path] = []
    for folder in folders:
        if folder.is_dir():
            found += sorted(folder.glob(f"torch-{TORCH_VERSION}*-{tag}-{tag}-*linux*_x86_64.whl"))
    return found[:1]


def _run_logged(argv: list[str], log: Callable[[str], None], *, stdin: int | None = None) -> None:
    log("$ " + " ".join(argv))
    process = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        log(line.rstrip("\n"))
    if process.wait() != 0:
        raise VertexdistError(
            f"making the local stand-in base image failed: `{' '.join(argv[:3])}` exited "
            f"{process.returncode}",
            hint="see the lines above; the stand-in needs Debian's mirror and the package index",
        )


def _make_os_image(docker: str, log: Callable[[str], None]) -> None:
    if os.geteuid() != 0 or shutil.which("debootstrap") is None:
        raise VertexdistError(
            f"the stand-in base image {STANDIN_IMAGE} is not in the daemon and cannot be made here",
            hint="it is made with debootstrap as root (apt-get install debootstrap); or make the template's "
            "BASE_IMAGE pullable",
        )
    with tempfile.TemporaryDirectory(prefix="vertexdist-standin-") as tmp:
        root = Path(tmp) / "root"
        try:
            _debootstrap_and_import(root, docker, log)
        finally:
            _unmount_under(root)  # a debootstrap that stopped half-way leaves /proc mounted in its tree


def _unmount_under(root: Path) -> None:
    """Lazily unmount whatever is mounted inside `root` (deepest first), so removing it removes only files."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return
    prefix = str(root.resolve()) + "/"
    inside = [fields[1] for fields in (line.split() for line in mounts) if len(fields) > 1]
    for point in sorted((p for p in inside if p.startswith(prefix)), reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def _debootstrap_and_import(root: Path, docker: str, log: Callable[[str], None]) -> None:
    includes = "--include=python3,python3-venv,ca-certificates"
    _run_logged(["debootstrap", "--variant=minbase", includes, DEBIAN_SUITE, str(root)], log)
    path = "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    try:
        assert tar.stdout is not None
        _run_logged([docker, "import", "--change", path, "-", OS_IMAGE], log, stdin=tar.stdout.fileno())
    finally:
        if tar.stdout:
            tar.stdout.close()
        tar.wait()


def ensure_standin(*, docker: str = "docker", log: Callable[[str], None] = print) -> str:
    """The stand-in image, made once per daemon: Debian by debootstrap (imported), then a build on it with
    torch's CPU wheel (a local one where pip's find-links has it) from the package index."""
    if image_present(STANDIN_IMAGE, docker):
        return STANDIN_IMAGE
    if not image_present(OS_IMAGE, docker):
        _make_os_image(docker, log)
    with tempfile.TemporaryDirectory(prefix="vertexdist-standin-ctx-") as tmp:
        context = Path(tmp)
        wheels = _torch_wheels()
        # A local CPU wheel where pip's find-links has one, else PyTorch's CPU index (PyPI's torch is CUDA's).
        source = "--find-links /tmp/wheels" if wheels else f"--extra-index-url {TORCH_CPU_INDEX}"
        dockerfile = STANDIN_DOCKERFILE.replace("{torch_source}", source)
        if HOST_CA_BUNDLE.is_file():
            shutil.copy(HOST_CA_BUNDLE, context / "ca-certificates.crt")
        else:  # the image's own bundle (Debian's ca-certificates) stays
            dockerfile = dockerfile.replace(_CA_COPY, "")
        (context / "Dockerfile").write_text(dockerfile)
        (context / "wheels").mkdir()
        for wheel in wheels:
            target = context / "wheels" / wheel.name
            try:
                os.link(wheel, target)  # the wheel is large: a hard link where the folders share a disk
            except OSError:
                shutil.copy(wheel, target)
        # The daemon may have no default bridge (the suite's has none): the host's network reaches the index.
        _run_logged([docker, "build", "--network", "host", "--tag", STANDIN_IMAGE, str(context)], log)
    return STANDIN_IMAGE


if __name__ == "__main__":  # pragma: no cover - by hand: python -m vertexdist.container.standin
    print(ensure_standin(log=lambda line: print(line, file=sys.stderr)))
