"""The "does this tag exist" edges: the registry v2 manifests call, and `docker manifest inspect`'s answers.

A small local HTTP server speaks the one registry call (HEAD /v2/<name>/manifests/<tag>); a stand-in
`docker` script answers like the CLI does. Neither builds anything.
"""

from __future__ import annotations

import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
import requests

from vertexdist.container.docker import docker_daemon_answers
from vertexdist.container.image import ImageRef, parse_repository
from vertexdist.container.registry import ArtifactRegistryChecker, DockerManifestChecker
from vertexdist.errors import VertexdistError

REPO = parse_repository("us-central1-docker.pkg.dev/vertexdist-demo/trainers")
PUSHED = "/v2/vertexdist-demo/trainers/vertexdist-trainer/manifests/ctx-aaaa"


class Registry(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str]]] = []

    def do_HEAD(self) -> None:
        Registry.seen.append((self.path, self.headers.get("Accept", "")))
        code = 200 if self.path == PUSHED else 403 if "forbidden" in self.path else 404
        self.send_response(code)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def registry() -> Iterator[str]:
    Registry.seen.clear()
    server = HTTPServer(("127.0.0.1", 0), Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_registry_v2_lookup(registry: str) -> None:
    checker = ArtifactRegistryChecker(session=requests.Session(), endpoint=registry)
    assert checker.exists(ImageRef(REPO, "vertexdist-trainer", "ctx-aaaa"))
    assert not checker.exists(ImageRef(REPO, "vertexdist-trainer", "ctx-bbbb"))
    path, accept = Registry.seen[0]
    assert path == PUSHED
    assert "application/vnd.oci.image.index.v1+json" in accept
    with pytest.raises(VertexdistError, match="answered 403"):
        checker.exists(ImageRef(REPO, "forbidden", "x"))


def stand_in_docker(tmp_path: Path, script: str) -> str:
    path = tmp_path / "docker"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_docker_manifest_inspect_answers(tmp_path: Path) -> None:
    docker = stand_in_docker(
        tmp_path,
        'case "$3" in\n'
        '  *:ctx-aaaa) echo "{}"; exit 0;;\n'
        '  *:ctx-bbbb) echo "no such manifest: $3" >&2; exit 1;;\n'
        '  *) echo "unauthorized: authentication required" >&2; exit 1;;\n'
        "esac\n",
    )
    checker = DockerManifestChecker(docker=docker)
    assert checker.exists(ImageRef(REPO, "vertexdist-trainer", "ctx-aaaa"))
    assert not checker.exists(ImageRef(REPO, "vertexdist-trainer", "ctx-bbbb"))
    with pytest.raises(VertexdistError, match="unauthorized") as info:
        checker.exists(ImageRef(REPO, "vertexdist-trainer", "other"))
    assert "configure-docker" in (info.value.hint or "")


def test_daemon_check_needs_a_server_answer(tmp_path: Path) -> None:
    no_server = stand_in_docker(tmp_path, 'echo "Cannot connect to the Docker daemon" >&2; exit 1\n')
    assert not docker_daemon_answers(no_server)
    assert not docker_daemon_answers(str(tmp_path / "missing-docker"))


def test_local_run_docker_argv() -> None:
    from vertexdist.local.docker_argv import docker_network_create_argv, docker_run_argv

    assert docker_network_create_argv("vd-job1") == [
        "docker",
        "network",
        "create",
        "--driver",
        "bridge",
        "vd-job1",
    ]
    argv = docker_run_argv(
        "img:tag",
        name="vd-job1-workerpool1-0",
        network="vd-job1",
        hostname="workerpool1-0",
        env={"RANK": "1", "MASTER_ADDR": "workerpool0-0"},
        command=["python", "-m", "trainer_pkg.cluster"],
        args=["--x"],
        gpus='"device=2,3"',
        mounts=[("/tmp/gcs", "/gcs")],
    )
    assert argv == [
        "docker", "run", "--rm", "--name", "vd-job1-workerpool1-0", "--network", "vd-job1",
        "--hostname", "workerpool1-0", "--network-alias", "workerpool1-0",
        "--env", "MASTER_ADDR=workerpool0-0", "--env", "RANK=1", "--volume", "/tmp/gcs:/gcs",
        "--gpus", '"device=2,3"', "--entrypoint", "python",
        "img:tag", "-m", "trainer_pkg.cluster", "--x",
    ]  # fmt: skip
    plain = docker_run_argv("img:tag", name="n", network="net", hostname="h", env={}, args=["--epochs", "1"])
    assert plain[-3:] == ["img:tag", "--epochs", "1"] and "--entrypoint" not in plain


def test_missing_credentials_become_a_message_with_a_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    with pytest.raises(VertexdistError, match="no Google credentials") as info:
        ArtifactRegistryChecker().exists(ImageRef(REPO, "vertexdist-trainer", "ctx-aaaa"))
    assert "application-default login" in (info.value.hint or "")
