"""Fixtures for the emulator and submit tests: a real emulator (Vertex REST + its Cloud Storage).

Replicas are cheap stand-ins (`python -c ...` containers, tiny trainer scripts) wherever the trainer itself
is not under test. Every emulator is stopped in a finalizer.
"""

from __future__ import annotations

import logging
import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Before any google-auth import: fail fast instead of probing the GCE metadata server
# (docs/reference/sdk-offline.md §5.1), and route the SDK's INFO logging through the root logger on stderr,
# not stdout (§5.3).
os.environ["NO_GCE_CHECK"] = "true"
logging.basicConfig(stream=sys.stderr, level=logging.WARNING)

from vertexdist.emulator import Emulator  # noqa: E402

PROJECT = "test-proj"
LOCATION = "us-central1"
PARENT = f"projects/{PROJECT}/locations/{LOCATION}"
BUCKET = "vd-staging"
PREBUILT_CPU_IMAGE = "us-docker.pkg.dev/vertex-ai/training/pytorch-xla.2-4.py310:latest"


def command_pool(
    code: str, replicas: int = 1, machine: str = "n1-standard-4", **machine_extra: Any
) -> dict[str, Any]:
    """A worker pool (snake_case, as proto-plus takes it) running a Python one-liner on the host."""
    return {
        "machine_spec": {"machine_type": machine, **machine_extra},
        "replica_count": replicas,
        "container_spec": {
            "image_uri": "example.com/standin:latest",
            "command": [sys.executable, "-c", code],
        },
    }


@pytest.fixture
def pool() -> Any:
    """`command_pool` for tests (importlib mode keeps conftest out of reach of plain imports)."""
    return command_pool


@pytest.fixture(scope="session")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    """One emulator for the session; Gets of unfinished jobs are held up to 5 s so SDK runs end fast."""
    emu = Emulator(data_dir=tmp_path_factory.mktemp("emulator"), hold_get_s=5.0)
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture(scope="session")
def warm_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    """One `--warm 2` emulator for the session (its pool imports torch once), for the warm variants."""
    emu = Emulator(data_dir=tmp_path_factory.mktemp("warm-emulator"), hold_get_s=5.0, warm=2)
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def emu(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[Emulator]:
    """The session emulator with no faults armed, and the environment pointing clients at it."""
    emulator.faults.clear()
    emulator.service.hold_get_s = 5.0
    monkeypatch.setenv("VERTEX_API_ENDPOINT", emulator.vertex_endpoint)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.storage_endpoint)
    yield emulator
    emulator.faults.clear()


@pytest.fixture
def job_client(emu: Emulator) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import JobServiceClient

    return JobServiceClient(
        transport="rest",
        client_options={"api_endpoint": emu.vertex_endpoint},
        credentials=AnonymousCredentials(),
    )


@pytest.fixture
def write_template(tmp_path: Path) -> Any:
    """Write a template whose trainer is a small script (a stand-in for trainer_pkg); returns its path."""

    def write(
        script: str | None = None,
        *,
        name: str = "unit-job",
        replicas: int = 1,
        env: dict[str, str] | None = None,
        extra: str = "",
    ) -> Path:
        folder = tmp_path / name
        folder.mkdir(exist_ok=True)
        # The default script names the job, so each test's package (and request) is its own.
        (folder / "train.py").write_text(textwrap.dedent(script or f"print('hello from {name}')\n"))
        env_lines = "".join(f"\n    {k}: {v!r}" for k, v in (env or {}).items())
        path = folder / "job.yaml"
        path.write_text(
            f"display_name: {name}\n"
            f"project: {PROJECT}\n"
            f"location: {LOCATION}\n"
            f"staging_bucket: gs://{BUCKET}/staging\n"
            f"container_uri: {PREBUILT_CPU_IMAGE}\n"
            "machine_type: n1-standard-4\n"
            f"replica_count: {replicas}\n"
            "trainer:\n"
            "  script: train.py\n"
            "  args: ['--epochs=1']\n" + (f"  env:{env_lines}\n" if env else "") + extra
        )
        return path

    return write


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """Run `vertexdist ARGS...` in-process through the real entry point -> (exit code, stdout, stderr).

    It runs in a temporary folder, so the .vertexdist/ caches it makes stay out of the work tree.
    """
    from vertexdist.cli import main

    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main.run(list(args))
        captured = capsys.readouterr()
        code = exit_info.value.code
        return (code if isinstance(code, int) else (0 if code is None else 1)), captured.out, captured.err

    return run


@pytest.fixture
def aiplatform(emu: Emulator) -> Any:
    """google.cloud.aiplatform, initialised for the emulator (anonymous, REST) with its staging bucket."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform, storage

    client = storage.Client(project=PROJECT)
    if client.lookup_bucket(BUCKET) is None:
        client.create_bucket(BUCKET)
    aiplatform.init(
        project=PROJECT,
        location="us-central1",
        staging_bucket=f"gs://{BUCKET}/stage",
        credentials=AnonymousCredentials(),
        api_endpoint=emu.vertex_endpoint,
        api_transport="rest",
    )
    return aiplatform
