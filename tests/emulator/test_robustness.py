"""Bad input and broken surroundings: taken ports, malformed endpoints, nothing listening, failed writes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vertexdist.backends.config import resolve_target
from vertexdist.backends.errors import api_error, is_transient
from vertexdist.emulator import Emulator
from vertexdist.emulator.store import JobStore
from vertexdist.errors import UsageError, VertexdistError


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port something else listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def _emulator_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name in ("emulator-supervisor", "vertex-emulator-http")}


def test_a_taken_storage_port_is_a_clear_error_not_a_hang(tmp_path: Path, taken_port: int) -> None:
    before = set(threading.enumerate())
    emu = Emulator(gcs_port=taken_port, data_dir=tmp_path / "data")
    with pytest.raises(VertexdistError, match=f"port {taken_port}") as caught:
        emu.start()
    assert "--gcs-port" in (caught.value.hint or "")
    assert not [t for t in set(threading.enumerate()) - before if t.is_alive() and not t.daemon]
    # The data folder's lock went with it: another emulator may use the folder now.
    with Emulator(data_dir=tmp_path / "data"):
        pass


def test_a_taken_api_port_is_a_clear_error_and_leaves_nothing_behind(tmp_path: Path, taken_port: int) -> None:
    before = _emulator_threads()
    with pytest.raises(VertexdistError, match="cannot listen") as caught:
        Emulator(port=taken_port, data_dir=tmp_path / "data")
    assert "--port" in (caught.value.hint or "")
    assert not {t for t in _emulator_threads() - before if t.is_alive()}
    with Emulator(data_dir=tmp_path / "data"):
        pass


def test_the_storage_thread_cannot_hang_interpreter_exit(tmp_path: Path) -> None:
    # An emulator never stopped (a crashed test, a script that forgot) must not keep Python from exiting.
    code = (
        "from vertexdist.emulator import Emulator\n"
        f"emu = Emulator(data_dir={str(tmp_path / 'data')!r}).start()\n"
        "print(emu.storage.port, flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().isdigit()


@pytest.mark.parametrize(
    "endpoint",
    ["http://", "ftp://127.0.0.1:8080", "http://127.0.0.1:notaport", "http//127.0.0.1:8080", "http://h:1/v1"],
)
def test_malformed_endpoints_are_usage_errors(endpoint: str) -> None:
    with pytest.raises(UsageError, match="not usable") as caught:
        resolve_target(env={"VERTEX_API_ENDPOINT": endpoint}, template_project="p")
    assert "emulator start" in (caught.value.hint or "")


def test_usable_endpoints_are_kept_without_surrounding_space_or_trailing_slash() -> None:
    for given, kept in [
        (" http://127.0.0.1:8080/ ", "http://127.0.0.1:8080"),
        ("europe-west4-aiplatform.googleapis.com", "europe-west4-aiplatform.googleapis.com"),
        ("localhost:8443", "localhost:8443"),
    ]:
        assert resolve_target(env={}, template_project="p", api_endpoint=given).api_endpoint == kept


def test_a_malformed_url_is_not_retried_but_a_refused_connection_is() -> None:
    import requests

    assert not is_transient(requests.exceptions.InvalidURL("No host supplied"))
    assert is_transient(requests.exceptions.ConnectionError("Connection refused"))


def test_nothing_listening_says_to_start_the_emulator() -> None:
    import requests

    refused = requests.exceptions.ConnectionError("[Errno 111] Connection refused")
    error = api_error(refused, "reading x", "p", "us-central1", endpoint="http://127.0.0.1:9")
    assert "vertexdist emulator start" in (error.hint or "")


def test_the_validate_hint_is_only_for_refused_creates() -> None:
    class Refused(Exception):
        code = 400
        message = "Cannot cancel x: it is already in state JOB_STATE_SUCCEEDED."

    assert "validate" not in (api_error(Refused(), "cancelling x", "p", "l").hint or "")
    assert "validate" in (api_error(Refused(), "creating the training pipeline", "p", "l").hint or "")


@pytest.fixture
def refused_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """VERTEX_API_ENDPOINT points at a loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("VERTEX_API_ENDPOINT", f"http://127.0.0.1:{port}")


@pytest.mark.usefixtures("refused_endpoint")
def test_refused_endpoint_through_the_cli_names_the_emulator(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No retries: one refused call is enough to check the message.
    monkeypatch.setattr("vertexdist.backends.vertex.RetryPolicy.delays", lambda _self: [])
    code, _out, err = cli("status", "123", "--project", "p")
    assert code == 1
    assert "vertexdist emulator start" in err and "Traceback" not in err


@pytest.mark.usefixtures("refused_endpoint")
def test_a_local_emulator_that_refuses_connections_fails_at_once(
    cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One retry after a minute: a refused connection must not wait for it.
    monkeypatch.setattr("vertexdist.backends.vertex.RetryPolicy.delays", lambda _self: [60.0])
    started = time.monotonic()
    code, _out, err = cli("status", "123", "--project", "p")
    assert code == 1 and "vertexdist emulator start" in err
    assert time.monotonic() - started < 30


def test_a_bad_page_size_is_400_and_a_server_bug_is_a_500_answer(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = f"{emu.vertex_endpoint}/v1/projects/p/locations/us-central1/customJobs"
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{base}?pageSize=lots", timeout=10)
    assert caught.value.code == 400
    assert "pageSize" in json.loads(caught.value.read())["error"]["message"]
    request = urllib.request.Request(
        f"{emu.vertex_endpoint}/vertexdist/v1/faults", data=b'{"no_such_field": 1}', method="POST"
    )
    request.add_header("Content-Type", "application/json")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 400
    assert "no_such_field" in json.loads(caught.value.read())["error"]["message"]

    def broken(*_args: Any) -> None:
        raise RuntimeError("a bug in the emulator")

    monkeypatch.setattr(emu.service, "list", broken)
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(base, timeout=10)
    assert caught.value.code == 500
    assert json.loads(caught.value.read())["error"]["status"] == "INTERNAL"


def test_a_failed_write_leaves_the_previous_file_and_no_temporary_one(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    name = "projects/p/locations/l/customJobs/1"
    store.insert({"name": name, "state": "JOB_STATE_SUCCEEDED"})
    with pytest.raises(TypeError):
        store.update(name, lambda job: job.update(bad=object()))
    folder = tmp_path / "resources" / "customJobs"
    assert [p.name for p in folder.iterdir()] == ["1.json"]
    assert json.loads((folder / "1.json").read_text())["state"] == "JOB_STATE_SUCCEEDED"
