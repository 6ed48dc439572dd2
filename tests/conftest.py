"""Fixtures shared across test folders: the repository root, file trees, and a template with `build`
beside a small build context (used by the image-building tests and the local backend's host runs)."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
STAGING_BUCKET = "vd-staging"


def _start_early(item: pytest.Item) -> tuple[float, bool]:
    """How long a test may run (its `timeout` mark) and whether it is `slow`: the longest first."""
    timeout = item.get_closest_marker("timeout")
    longest = float(timeout.args[0]) if timeout and timeout.args else 0.0
    return -longest, item.get_closest_marker("slow") is None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest test files start first (stable otherwise): `make test` hands whole files to two workers,
    and a long file handed out last would leave one worker waiting on it alone."""
    first_seen: dict[str, int] = {}
    keys: dict[str, tuple[float, bool]] = {}
    for index, item in enumerate(items):
        path = str(item.path)
        first_seen.setdefault(path, index)
        keys[path] = min(keys.get(path, (0.0, True)), _start_early(item))
    items.sort(key=lambda item: (*keys[str(item.path)], first_seen[str(item.path)]))


def write_tree(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """Create `files` (relative path -> content) under `root`."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Callable[[Mapping[str, str | bytes]], Path]:
    def make(files: Mapping[str, str | bytes]) -> Path:
        return write_tree(tmp_path / "ctx", files)

    return make


TEMPLATE = """\
display_name: built-job
project: vertexdist-demo
location: us-central1
staging_bucket: gs://{bucket}/staging
machine_type: n1-standard-4
replica_count: 2
build:
{build}
"""


def template_text(build: str, bucket: str = STAGING_BUCKET) -> str:
    return TEMPLATE.format(bucket=bucket, build=textwrap.indent(textwrap.dedent(build).strip("\n"), "  "))


@pytest.fixture
def built_template(tmp_path: Path) -> Callable[..., Path]:
    """A template file beside a small build context (`ctx/`) with a Dockerfile and a package."""

    def make(build: str | None = None, files: Mapping[str, str | bytes] | None = None) -> Path:
        write_tree(
            tmp_path / "ctx",
            files
            or {
                "Dockerfile": "FROM python:3.11-slim\nCOPY app/ /app/app/\n"
                'ENTRYPOINT ["python", "-m", "app.task"]\n',
                "app/__init__.py": "",
                "app/task.py": "print('hello from app.task')\n",
            },
        )
        path = tmp_path / "job.yaml"
        path.write_text(
            template_text(
                build
                or """
                context: ctx
                dockerfile: ctx/Dockerfile
                repository: us-central1-docker.pkg.dev/vertexdist-demo/trainers
                """
            )
        )
        return path

    return make


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture
def write_files() -> Callable[[Path, Mapping[str, str | bytes]], Path]:
    return write_tree


class ExampleChecks:
    """What a run of examples/ddp or examples/fsdp (2 replicas x 2 processes) must show in its logs and
    outputs; shared by the local-run and the emulator tests (importlib mode keeps helpers in fixtures)."""

    ROOT = REPO_ROOT / "examples"
    DONE = re.compile(
        r"^rank (?P<rank>\d+)/(?P<world>\d+) \(node (?P<node>\d+), "
        r"local rank (?P<local>\d+)/(?P<local_world>\d+)\): done, (?P<rest>.*)$"
    )
    HOLDS = re.compile(r"holds (\d+) of (\d+) parameters, full parameters sha256 (\w+)")

    RESTART = "----- vertexdist: job restart"

    @classmethod
    def last_attempt(cls, log: Path) -> list[str]:
        """The lines of the job's last attempt: a whole-job restart (restart_job_on_worker_restart, which
        the examples set) reruns every rank, and only the attempt that succeeded is the job's result."""
        text = log.read_text()
        return text[text.rfind(cls.RESTART) :].splitlines() if cls.RESTART in text else text.splitlines()

    @classmethod
    def done_lines(cls, logs: Sequence[Path]) -> list[dict[str, str]]:
        """Every rank's last line, with the replica whose log it is in."""
        found = []
        for log in logs:
            for line in cls.last_attempt(log):
                match = cls.DONE.match(line)
                if match:
                    found.append({**match.groupdict(), "replica": log.stem})
        return found

    @staticmethod
    def check_ranks(ranks: list[dict[str, str]]) -> None:
        """4 distinct global ranks in a world of 4, local ranks 0 and 1 on each of the 2 replicas."""
        assert sorted(int(r["rank"]) for r in ranks) == [0, 1, 2, 3]
        assert {(r["world"], r["local_world"]) for r in ranks} == {("4", "2")}
        by_replica: dict[str, set[str]] = {}
        for r in ranks:
            by_replica.setdefault(r["replica"], set()).add(r["local"])
        assert by_replica == {"workerpool0-0": {"0", "1"}, "workerpool1-0": {"0", "1"}}
        assert {(r["replica"], r["node"]) for r in ranks} == {("workerpool0-0", "0"), ("workerpool1-0", "1")}

    @classmethod
    def check_ddp(cls, logs: Sequence[Path], gcs_root: Path) -> None:
        ranks = cls.done_lines(logs)
        cls.check_ranks(ranks)
        assert len({r["rest"] for r in ranks}) == 1, "the ranks ended with different parameters"
        assert [p.name for p in gcs_root.rglob("*.pt")] == ["model.pt"]
        lines = [line for log in logs for line in cls.last_attempt(log)]
        assert len([line for line in lines if line.startswith("Saved the model")]) == 1

    @classmethod
    def check_fsdp(cls, logs: Sequence[Path], gcs_root: Path) -> None:
        ranks = cls.done_lines(logs)
        cls.check_ranks(ranks)
        shares = [m for r in ranks if (m := cls.HOLDS.match(r["rest"]))]
        assert len(shares) == 4
        held = [int(m.group(1)) for m in shares]
        total = {int(m.group(2)) for m in shares}.pop()
        assert all(0.2 < h / total < 0.3 for h in held), f"not a quarter each: {held} of {total}"
        assert sum(held) >= total
        assert len({m.group(3) for m in shares}) == 1, "the shards do not make one model"
        [checkpoint] = {p.parent for p in gcs_root.rglob("*.distcp")}
        names = sorted(p.name for p in checkpoint.iterdir())
        assert names == [".metadata", "__0_0.distcp", "__1_0.distcp", "__2_0.distcp", "__3_0.distcp"]


@pytest.fixture
def examples() -> type[ExampleChecks]:
    return ExampleChecks


def _wheel(out_dir: Path, name: str, version: str, files: Mapping[str, str]) -> Path:
    """A minimal pure-Python wheel, written by hand (no build backend, no network)."""
    import base64
    import hashlib
    import zipfile

    info = f"{name}-{version}.dist-info"
    members = dict(files)
    members[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    members[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: vertexdist-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = []
    for rel, text in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{rel},sha256={digest},{len(text.encode())}")
    members[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    path = out_dir / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for rel, text in members.items():
            archive.writestr(rel, text)
    return path


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with one tiny requirement, `vdreqdemo` (VALUE = 42), for offline pip (`--find-links`)."""
    folder = tmp_path_factory.mktemp("wheelhouse")
    _wheel(folder, "vdreqdemo", "1.0", {"vdreqdemo/__init__.py": "VALUE = 42\n"})
    return folder


@pytest.fixture
def offline_pip(wheelhouse: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip in jobs started from this process installs from `wheelhouse` only, and builds sdists with the
    setuptools already here (no build isolation, which would fetch setuptools from an index)."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheelhouse))
    monkeypatch.setenv("PIP_NO_BUILD_ISOLATION", "0")
    return wheelhouse


@pytest.fixture(scope="session")
def pip_freeze() -> Callable[[], str]:
    """`pip freeze --all` of the interpreter vertexdist runs in: a job that changes it changed the host."""
    import subprocess
    import sys

    def freeze() -> str:
        argv = [sys.executable, "-m", "pip", "freeze", "--all"]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

    return freeze
