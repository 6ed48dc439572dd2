"""Commands that reach an emulator someone started (`vertexdist emulator start`): by its Vertex endpoint
alone (its Cloud Storage endpoint comes with it: from its folder, else from the emulator itself), by
`--emulator` without `--project`, and `submit --emulator` to the emulator serving the folder. Run with
STORAGE_EMULATOR_HOST unset, as a new user's shell has it."""

from __future__ import annotations

import fcntl
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vertexdist.backends.config import Target
from vertexdist.emulator import Emulator
from vertexdist.emulator.folder import Endpoints, ask, write_endpoints
from vertexdist.errors import UsageError
from vertexdist.jobs.emulator_storage import require_storage, with_emulator_storage

pytestmark = [pytest.mark.integration]


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("STORAGE_EMULATOR_HOST", "VERTEX_API_ENDPOINT", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)


def _refused_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture
def served_folder(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A folder as a serving emulator leaves it (its endpoints written, its lock held), naming a Vertex
    endpoint nothing listens on: only the folder can say where the storage is."""
    folder = tmp_path / ".vertexdist" / "emulator"
    folder.mkdir(parents=True)
    vertex = _refused_endpoint()
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        write_endpoints(folder, Endpoints(vertex, "http://127.0.0.1:4443"))
        yield folder, vertex


def test_the_folder_of_the_emulator_named_gives_its_storage(served_folder: tuple[Path, str]) -> None:
    folder, vertex = served_folder
    target = Target(project="p", location="us-central1", api_endpoint=vertex, api_transport="rest")
    assert with_emulator_storage(target, folder).storage_endpoint == "http://127.0.0.1:4443"
    # Another emulator's endpoint: the folder is not believed for it, and nothing answers there either.
    other = Target(
        project="p", location="us-central1", api_endpoint=_refused_endpoint(), api_transport="rest"
    )
    assert with_emulator_storage(other, folder).storage_endpoint is None
    vertex_ai = Target(project="p", location="us-central1")
    assert with_emulator_storage(vertex_ai, folder) is vertex_ai  # Vertex itself: nothing to look up


def test_an_unknown_storage_is_refused_at_once_naming_the_variable(
    emulator: Emulator, tmp_path: Path
) -> None:
    assert ask(emulator.vertex_endpoint) == Endpoints(emulator.vertex_endpoint, emulator.storage_endpoint)
    # Something that answers, but not as an emulator does (the storage emulator's own port).
    elsewhere = Target(
        project="p", location="l", api_endpoint=emulator.storage_endpoint, api_transport="rest"
    )
    started = time.monotonic()
    with pytest.raises(UsageError) as caught:
        require_storage(with_emulator_storage(elsewhere, tmp_path), tmp_path)
    assert "STORAGE_EMULATOR_HOST is not set" in caught.value.message
    assert "emulator start" in (caught.value.hint or "")
    down = Target(project="p", location="l", api_endpoint=_refused_endpoint(), api_transport="rest")
    with pytest.raises(UsageError, match="nothing answers at"):
        require_storage(down, tmp_path)
    assert time.monotonic() - started < 10


@pytest.mark.usefixtures("bare_env")
def test_submit_with_only_the_endpoint_reaches_the_emulators_storage(
    emulator: Emulator, cli: Any, write_template: Any
) -> None:
    """Issue 36 item 1: this used to upload to Google's Cloud Storage, retrying for minutes."""
    template = write_template(name="endpoint-only")
    started = time.monotonic()
    code, out, err = cli("submit", str(template), "--endpoint", emulator.vertex_endpoint, "--detach")
    assert code == 0, err
    assert time.monotonic() - started < 30
    name = out.strip().splitlines()[-1]
    assert emulator.service.get(name)["name"] == name


@pytest.mark.usefixtures("bare_env")
def test_submit_emulator_goes_to_the_emulator_serving_the_folder(
    emulator: Emulator, cli: Any, write_template: Any
) -> None:
    """Issue 36 item 11: it used to refuse the folder as "in use by another emulator"."""
    template = write_template(name="to-the-serving-one")
    at = ["--emulator", "--emulator-data-dir", str(emulator.data_dir)]
    code, out, err = cli("submit", str(template), *at, "--detach")
    assert code == 0, err
    name = out.strip().splitlines()[-1]
    assert emulator.service.get(name)["name"] == name
    assert f"vertexdist status {name} --emulator --emulator-data-dir" in err  # the way back, as printed
    code, _, err = cli("submit", str(template), *at, "--procs-per-replica", "2", "--yes")
    assert code == 2 and "--procs-per-replica 2" in err and "emulator start --procs-per-replica" in err


@pytest.mark.usefixtures("bare_env")
def test_pool_commands_with_emulator_need_no_project(emulator: Emulator, cli: Any) -> None:
    """Issue 36 item 10: `pool list|describe|delete|create --machine-type ... --emulator` wanted --project."""
    at = ["--emulator", "--emulator-data-dir", str(emulator.data_dir)]
    code, out, err = cli("pool", "create", "by-hand-1", "--machine-type", "n1-standard-4", *at)
    assert code == 0, err
    assert "projects/vertexdist-local/locations/us-central1/persistentResources/by-hand-1" in out
    code, out, err = cli("pool", "list", *at, "--json")
    assert code == 0, err
    assert "by-hand-1" in {resource["name"].rsplit("/", 1)[1] for resource in json.loads(out)}
    code, out, err = cli("pool", "describe", "by-hand-1", *at)
    assert code == 0 and "1 x n1-standard-4" in out, err
    code, out, err = cli("pool", "delete", "by-hand-1", *at)
    assert code == 0 and out.startswith("deleted projects/vertexdist-local/"), err
    code, _, err = cli("pool", "describe", "by-hand-1", *at)
    assert code == 2 and "no persistent resource by-hand-1 in the emulator's folder" in err
    assert "vertexdist pool list --emulator" in err


@pytest.mark.usefixtures("bare_env")
def test_submit_managed_emulator_goes_to_the_serving_one_too(
    emulator: Emulator, cli: Any, write_template: Any
) -> None:
    """A started emulator outlives the command, as a managed job must (it used to refuse --emulator)."""
    template = write_template(name="managed-to-the-serving-one")
    at = ["--emulator", "--emulator-data-dir", str(emulator.data_dir)]
    code, out, err = cli("submit", str(template), "--managed", *at)
    assert code == 0, err
    assert out.splitlines()[0].startswith("managed: m-")
    code, out, _ = cli("managed", "status", out.splitlines()[0].removeprefix("managed: "), "--json")
    assert json.loads(out)["state"] == "SUCCEEDED"
