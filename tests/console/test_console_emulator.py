"""The console and a started emulator (issue 36 item 2), with STORAGE_EMULATOR_HOST unset as in a new user's
shell: plain `vertexdist ui` beside the emulator's folder, `--emulator`, and `--endpoint` alone each show its
jobs (of every project in it) with their charts; storage that cannot be read says so, never "no scalars";
an emulator that does not answer is said to be down, without urllib3's words."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from vertexdist.backends.config import Target
from vertexdist.console.app import build_app
from vertexdist.console.jobs import EMULATOR_DOWN, Console, page_backend

pytestmark = [pytest.mark.integration]

# Writes TensorBoard scalars with TensorBoard's own writer (no torch) into AIP_TENSORBOARD_LOG_DIR, through
# the emulator's /gcs stand-in (VERTEXDIST_GCS_ROOT), as a script on Vertex writes through /gcs; marks a
# step after each (`health.step()`), for its goodput ledger.
SHIPPED = Path(__file__).resolve().parents[2] / "vertexdist" / "shipped"
SCALARS = (
    "import os, sys, time\n"
    f"sys.path.insert(0, {str(SHIPPED)!r})\n"
    "from vertexdist_launcher import health\n"  # its steps, for the goodput ledger
    "health.start()\n"
    "from tensorboard.compat.proto.event_pb2 import Event\n"
    "from tensorboard.compat.proto.summary_pb2 import Summary\n"
    "from tensorboard.summary.writer.event_file_writer import EventFileWriter\n"
    "folder = os.environ['VERTEXDIST_GCS_ROOT'] + '/' + os.environ['AIP_TENSORBOARD_LOG_DIR'][len('gs://'):]\n"
    "writer = EventFileWriter(folder)\n"
    "for step in range(1, 4):\n"
    "    value = Summary.Value(tag='user/score', simple_value=step * step)\n"
    "    writer.add_event(Event(step=step, wall_time=time.time(), summary=Summary(value=[value])))\n"
    "    time.sleep(0.2)\n"
    "    health.step()\n"
    "writer.close()\n"
)


def _job(jobs: Any, parent: str, name: str, code: str) -> str:
    from google.cloud.aiplatform_v1 import types

    spec = {
        "worker_pool_specs": [
            {
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "container_spec": {"image_uri": "example.com/x:1", "command": [sys.executable, "-c", code]},
            }
        ],
        "base_output_directory": {"output_uri_prefix": f"gs://vd-console-emu/out/{name}"},
    }
    created = jobs.create_custom_job(
        parent=parent, custom_job=types.CustomJob(display_name=name, job_spec=spec)
    )
    return str(created.name)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A project folder whose `.vertexdist/emulator` a started emulator serves, with a job that wrote scalars
    and a job of another project."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.aiplatform_v1 import JobServiceClient, types

    from vertexdist.emulator import Emulator

    folder = tmp_path_factory.mktemp("console-emulator")
    emulator = Emulator(data_dir=folder / ".vertexdist" / "emulator", hold_get_s=2.0).start()
    try:
        jobs = JobServiceClient(
            transport="rest",
            client_options={"api_endpoint": emulator.vertex_endpoint},
            credentials=AnonymousCredentials(),
        )
        scores = _job(jobs, "projects/vertexdist-local/locations/us-central1", "scores", SCALARS)
        other = _job(jobs, "projects/other-proj/locations/europe-west4", "elsewhere", "print('hi')")
        for name in (scores, other):
            deadline = time.monotonic() + 60
            while jobs.get_custom_job(name=name).state != types.JobState.JOB_STATE_SUCCEEDED:
                assert time.monotonic() < deadline, f"{name} did not succeed"
                time.sleep(0.2)
        yield {"folder": folder, "emulator": emulator, "scores": scores, "other": other}
    finally:
        emulator.stop()


def _ui(cwd: Path, *args: str) -> tuple[Any, str]:
    """`vertexdist ui --port 0 ARGS` in `cwd`, with neither emulator variable set."""
    import subprocess

    env = {**os.environ, "NO_GCE_CHECK": "true"}
    for name in ("VERTEX_API_ENDPOINT", "STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT"):
        env.pop(name, None)
    process = subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "ui", "--port", "0", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if line.startswith("vertexdist console: "):
            return process, line.split(": ", 1)[1].strip().rstrip("/")
    raise AssertionError(f"ui printed no URL: {''.join(seen)}")


def _get(url: str) -> Any:
    import urllib.request

    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


def _ref(name: str) -> str:
    return "vertex/" + "/".join(name.split("/")[-2:])


def _shows(get: Any, served: dict[str, Any], *, every_project: bool = True) -> None:
    scores, other = _ref(served["scores"]), _ref(served["other"])
    listed = {row["ref"] for row in get("/api/jobs")["jobs"]}
    assert scores in listed, listed
    assert (other in listed) == every_project  # with the folder: every project in it
    series = get(f"/api/metrics/{scores}")
    assert [s["tag"] for s in series["series"]] == ["user/score"], series
    assert [p[1] for p in series["series"][0]["points"]] == [1.0, 4.0, 9.0]


def test_plain_ui_beside_a_started_emulator_shows_its_jobs_and_charts(served: dict[str, Any]) -> None:
    process, base = _ui(served["folder"])
    try:
        _shows(lambda path: _get(base + path), served)
    finally:
        process.terminate()
        process.wait(15)


@pytest.mark.parametrize("way", ["--emulator", "--endpoint"])
def test_ui_emulator_and_ui_endpoint_show_them_too(
    served: dict[str, Any], way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As `ui --emulator --emulator-data-dir DIR` and `ui --endpoint URL` (its storage endpoint asked of the
    emulator) make them, elsewhere than the emulator's project folder."""
    from vertexdist.cli.ui import console_remote

    for name in ("VERTEX_API_ENDPOINT", "STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    emulator = served["emulator"]
    folder = emulator.data_dir if way == "--emulator" else None
    endpoint = emulator.vertex_endpoint if way == "--endpoint" else None
    with console_remote(None, None, endpoint, None, folder) as (remote, shown_folder):
        console = Console(tmp_path / "runs", remote, cache_dir=tmp_path / "cache", emulator_dir=shown_folder)
        client = TestClient(build_app(console))
        _shows(lambda path: client.get(path).json(), served, every_project=way == "--emulator")


def test_unreadable_storage_and_a_stopped_emulator_are_said_so(
    served: dict[str, Any], tmp_path: Path
) -> None:
    emulator = served["emulator"]
    refused = "http://127.0.0.1:9"
    scores = _ref(served["scores"])
    base = {"project": "vertexdist-local", "location": "us-central1", "api_transport": "rest"}
    for storage in (refused, None):
        target = Target(**base, api_endpoint=emulator.vertex_endpoint, storage_endpoint=storage)
        console = Console(tmp_path / "runs", page_backend(target), cache_dir=tmp_path / "cache")
        answer = TestClient(build_app(console)).get(f"/api/metrics/{scores}").json()
        assert answer["series"] == [] and answer["problem"].startswith("storage unreachable: "), answer
        if storage is None:
            assert "STORAGE_EMULATOR_HOST" in answer["problem"]
    down = Console(
        tmp_path / "runs",
        page_backend(Target(**base, api_endpoint=refused, storage_endpoint=refused)),
        cache_dir=tmp_path / "cache",
    )
    client = TestClient(build_app(down))
    assert client.get("/api/jobs").json()["problems"] == [f"{down.remote_label}: {EMULATOR_DOWN}"]
    page = client.get(f"/jobs/{scores}")
    assert page.status_code == 503
    assert "emulator not answering" in page.text and "NewConnectionError" not in page.text


def test_an_emulator_jobs_goodput_shows_in_the_list_and_as_a_bar_on_its_page(
    served: dict[str, Any], tmp_path: Path
) -> None:
    from vertexdist.cli.ui import console_remote

    emulator = served["emulator"]
    with console_remote(None, None, None, None, emulator.data_dir) as (remote, shown_folder):
        console = Console(tmp_path / "runs", remote, cache_dir=tmp_path / "cache", emulator_dir=shown_folder)
        client = TestClient(build_app(console))
        rows = {row["ref"]: row for row in client.get("/api/jobs").json()["jobs"]}
        scores = _ref(served["scores"])
        assert 0.0 < rows[scores]["goodput"] < 1.0, rows[scores]  # its steps are productive, not its start
        page = client.get(f"/jobs/{scores}").text
    bar = page.split('id="goodput-bar"', 1)[1].split("</div>", 1)[0]
    assert 'class="gp-startup"' in bar and 'class="gp-productive"' in bar, bar
    assert f"vertexdist goodput {scores.rsplit('/', 1)[1]} --emulator" in page  # as the CLI takes it
