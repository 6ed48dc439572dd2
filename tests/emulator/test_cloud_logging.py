"""`vertexdist logs` through the real google-cloud-logging client against the emulator's Cloud Logging API:
a 2-replica job's entries in Vertex's shape, filtered by replica and by severity, paged, followed while the
job runs (library and CLI, Ctrl-C included), and filters the emulator cannot read refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.interrupts import default_sigint
from vertexdist.backends.base import JobStatus, LogChunk, LogQuery
from vertexdist.backends.config import Target
from vertexdist.backends.vertex import VertexBackend
from vertexdist.backends.vertex.cloud_logging import CloudLoggingSource
from vertexdist.backends.watch import PollPolicy, read_logs, watch
from vertexdist.cli.job_view import where_lines
from vertexdist.emulator import Emulator

pytestmark = pytest.mark.integration

PROJECT = "test-proj"
PARENT = f"projects/{PROJECT}/locations/us-central1"
LINES = 30  # per stream and replica: 120 entries, more than a page
CHATTY = (
    "import os, sys\n"
    f"for i in range({LINES}):\n"
    "    print(f'out {os.environ[\"RANK\"]} {i}', flush=True)\n"
    "    print(f'err {os.environ[\"RANK\"]} {i}', file=sys.stderr, flush=True)\n"
)


def run_job(job_client: Any, pool: Any, code: str, replicas: int = 2, wait: bool = True) -> str:
    spec = {"worker_pool_specs": [pool(code, 1), pool(code, replicas - 1)]}
    job = job_client.create_custom_job(parent=PARENT, custom_job={"display_name": "logs", "job_spec": spec})
    deadline = time.monotonic() + 60
    while wait and time.monotonic() < deadline:
        if job_client.get_custom_job(name=job.name).state.name == "JOB_STATE_SUCCEEDED":
            break
        time.sleep(0.05)
    return str(job.name)


def logging_client(emu: Emulator) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.logging_v2.client import Client

    return Client(
        project=PROJECT,
        credentials=AnonymousCredentials(),
        _use_grpc=False,
        client_options={"api_endpoint": emu.vertex_endpoint},
    )


def backend(emu: Emulator, page_size: int = 1000) -> VertexBackend:
    target = Target(
        project=PROJECT, location="us-central1", api_endpoint=emu.vertex_endpoint, api_transport="rest"
    )
    return VertexBackend(target, log_source=CloudLoggingSource(target, page_size=page_size))


def lines_of(chunks: list[LogChunk]) -> list[tuple[str, str, str]]:
    return [(c.replica, c.text, c.severity) for c in chunks]


def by_stream(lines: list[tuple[str, str, str]]) -> dict[str, list[tuple[str, str, str]]]:
    """Lines of each severity in order (stdout and stderr are two pipes: their relative order is not kept)."""
    return {severity: [line for line in lines if line[2] == severity] for severity in ("INFO", "ERROR")}


def expected(rank: int, replica: str) -> list[tuple[str, str, str]]:
    return [
        (replica, f"{kind} {rank} {i}", sev)
        for i in range(LINES)
        for kind, sev in (("out", "INFO"), ("err", "ERROR"))
    ]


@pytest.fixture
def chatty_job(emu: Emulator, job_client: Any, pool: Any) -> str:
    return run_job(job_client, pool, CHATTY)


def test_entries_have_vertex_shape_and_page_through_the_client(emu: Emulator, chatty_job: str) -> None:
    job_id = chatty_job.rsplit("/", 1)[1]
    client = logging_client(emu)
    entries = list(
        client.list_entries(
            filter_=f'resource.type="ml_job" AND resource.labels.job_id="{job_id}"', page_size=7
        )
    )  # no time term: the client adds "the last 24 hours" itself, which the emulator reads too
    assert len(entries) == 4 * LINES
    first = entries[0]
    assert first.resource.type == "ml_job"
    assert first.resource.labels == {
        "job_id": job_id,
        "task_name": first.resource.labels["task_name"],
        "project_id": PROJECT,
    }
    assert first.log_name == f"projects/{PROJECT}/logs/{first.resource.labels['task_name']}"
    assert first.labels["ml.googleapis.com/trial_id"] == ""
    assert {e.severity for e in entries} == {"INFO", "ERROR"}
    assert all(e.payload["levelname"] == e.severity for e in entries)
    assert len({e.insert_id for e in entries}) == len(entries)
    keys = [(e.timestamp, e.insert_id) for e in entries]
    assert keys == sorted(keys)
    # A page really is a page: the raw API hands out a token while more entries match.
    body = {
        "resourceNames": [f"projects/{PROJECT}"],
        "filter": f'resource.labels.job_id="{job_id}"',
        "pageSize": 50,
    }
    page = post(emu, body)
    assert len(page["entries"]) == 50 and page["nextPageToken"]
    rest = post(emu, {**body, "pageToken": page["nextPageToken"], "pageSize": 1000})
    assert len(rest["entries"]) == 4 * LINES - 50 and "nextPageToken" not in rest
    newest_first = post(emu, {**body, "orderBy": "timestamp desc", "pageSize": 1000})["entries"]
    assert [e["insertId"] for e in newest_first] == [
        e["insertId"] for e in page["entries"] + rest["entries"]
    ][::-1]


def test_the_backend_reads_by_replica_and_severity_page_by_page(emu: Emulator, chatty_job: str) -> None:
    vertex = backend(emu, page_size=9)
    pages = []
    cursor: object | None = None
    while True:
        page = vertex.logs(chatty_job, cursor)
        pages.append(page)
        cursor = page.cursor
        if not page.more:
            break
    assert len(pages) > 10
    got = lines_of([c for p in pages for c in p.chunks])
    for rank, replica in ((0, "workerpool0-0"), (1, "workerpool1-0")):
        assert by_stream([g for g in got if g[0] == replica]) == by_stream(expected(rank, replica))
    stamps = [c.timestamp for p in pages for c in p.chunks]
    assert stamps == sorted(stamps)

    only: list[LogChunk] = []
    read_logs(vertex, chatty_job, None, LogQuery(replica="workerpool1-0"), only.append)
    assert by_stream(lines_of(only)) == by_stream(expected(1, "workerpool1-0"))
    errors: list[LogChunk] = []
    read_logs(vertex, chatty_job, None, LogQuery(severity="ERROR"), errors.append)
    assert {c.severity for c in errors} == {"ERROR"} and len(errors) == 2 * LINES
    later: list[LogChunk] = []
    read_logs(vertex, chatty_job, None, LogQuery(since=time.time() + 3600), later.append)
    assert later == []


def test_the_cli_filters_and_prints_json(emu: Emulator, chatty_job: str, cli: Any) -> None:
    code, out, err = cli("logs", chatty_job, "--replica", "workerpool1-0", "--severity", "error")
    assert code == 0, err
    assert out.splitlines() == [f"[workerpool1-0] err 1 {i}" for i in range(LINES)]
    code, out, err = cli("logs", chatty_job, "--since", "1h", "--json")
    records = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(records) == 4 * LINES
    assert set(records[0]) == {"replica", "line", "severity", "timestamp"}
    code, _, err = cli("logs", chatty_job, "--since", "yesterday")
    assert code == 2 and "--since" in err and "duration" in err
    code, _, err = cli("logs", chatty_job, "--severity", "LOUD")
    assert code == 2 and "ERROR" in err


def test_a_pipelines_logs_are_its_custom_jobs(emu: Emulator, cli: Any, write_template: Any) -> None:
    path = write_template(
        "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\n", name="piped"
    )
    code, out, err = cli("submit", str(path))
    assert code == 0, err
    name = out.splitlines()[0]
    assert "/trainingPipelines/" in name and f"logs: vertexdist logs {name} --follow" in err
    assert "outputs: gs://vd-staging/staging/vertexdist/output/" in err
    code, out, err = cli("logs", name, "--json")
    got = {(r["line"], r["severity"]) for r in map(json.loads, out.splitlines())}
    assert {("to stdout", "INFO"), ("to stderr", "ERROR")} <= got
    code, out, _ = cli("status", name)
    assert f"  logs:         vertexdist logs {name}\n" in out and f"vertexdist outputs {name}" in out
    assert "log viewer" not in out  # an emulator job has no console
    code, out, _ = cli("status", name, "--json")
    assert json.loads(out)["where"]["logsCommand"] == f"vertexdist logs {name}"


def test_on_vertex_status_links_the_logs_explorer_query_of_the_custom_job() -> None:
    pipeline = "projects/my-proj/locations/us-central1/trainingPipelines/77"
    status = JobStatus(
        name=pipeline,
        display_name="d",
        state="RUNNING",
        backing_job="projects/my-proj/locations/us-central1/customJobs/123",
        spec={"baseOutputDirectory": {"outputUriPrefix": "gs://b/out/job-1"}},
    )
    lines = where_lines(status, pipeline, on_vertex=True)
    assert lines[:3] == [
        "  outputs:      gs://b/out/job-1/",
        f"                vertexdist outputs {pipeline} --download DIR",
        f"  logs:         vertexdist logs {pipeline} --follow",
    ]
    (viewer,) = [line for line in lines if "log viewer" in line]
    assert "console.cloud.google.com/logs/query;query=" in viewer and "?project=my-proj" in viewer
    assert "resource.labels.job_id%3D%22123%22" in viewer


def test_following_a_running_job_gets_every_line_once_across_pages(
    emu: Emulator, job_client: Any, pool: Any, tmp_path: Path
) -> None:
    emu.service.hold_get_s = 0
    go = tmp_path / "go"
    code = (
        "import os, pathlib, sys, time\n"
        "rank = os.environ['RANK']\n"
        "for i in range(40):\n"
        "    print(f'tick {rank} {i}', flush=True)\n"
        "    if i % 3 == 0: print(f'warn {rank} {i}', file=sys.stderr, flush=True)\n"
        "    time.sleep(0.02)\n"
        f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.05)\n"
        "print(f'bye {rank}', flush=True)\n"
    )
    name = run_job(job_client, pool, code, wait=False)
    seen: list[tuple[str, str, str]] = []
    states: list[str] = []

    def on_logs(chunk: LogChunk, status: Any) -> None:
        seen.append((chunk.replica, chunk.text, chunk.severity))
        states.append(status.state)
        if len(seen) >= 20:
            go.touch()  # the job ends only once lines were followed while it ran

    final = watch(
        backend(emu, page_size=4), name, on_status=lambda s: None, on_logs=on_logs,
        policy=PollPolicy(initial_s=0.05, follow_max_s=0.1),
    )  # fmt: skip
    assert final.state == "SUCCEEDED"
    assert "RUNNING" in states
    assert len(seen) == len(set(seen)) == 2 * (40 + 14 + 1)
    # Each stream in its own order. Across streams there is no order to keep: a stderr line may land behind
    # stdout lines printed after it (its copying thread was not scheduled in time), as in Cloud Logging.
    for rank, replica in ((0, "workerpool0-0"), (1, "workerpool1-0")):
        stdout = [text for r, text, severity in seen if r == replica and severity == "INFO"]
        stderr = [text for r, text, severity in seen if r == replica and severity == "ERROR"]
        assert stdout == [*(f"tick {rank} {i}" for i in range(40)), f"bye {rank}"]
        assert stderr == [f"warn {rank} {i}" for i in range(0, 40, 3)]


def test_logs_follow_in_the_cli_ends_on_ctrl_c_with_130(emu: Emulator, job_client: Any, pool: Any) -> None:
    emu.service.hold_get_s = 0  # the follower's polls answer at once
    name = run_job(
        job_client, pool, "import time\nprint('started', flush=True)\ntime.sleep(60)\n", wait=False
    )
    env = {**os.environ, "VERTEX_API_ENDPOINT": emu.vertex_endpoint, "NO_GCE_CHECK": "true"}
    follower = subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "logs", name, "--follow"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint,
    )  # fmt: skip
    try:
        assert follower.stdout is not None
        line = follower.stdout.readline()
        assert line.strip() in ("[workerpool0-0] started", "[workerpool1-0] started")
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=30)
    finally:
        follower.kill()
        job_client.cancel_custom_job(name=name)
    assert follower.returncode == 130
    assert "Traceback" not in err


def test_a_tuning_jobs_logs_are_its_trials_prefixed_and_filtered_by_trial(
    emu: Emulator, job_client: Any, cli: Any
) -> None:
    from google.cloud.aiplatform_v1 import types

    trial_script = Path(__file__).parents[1] / "tuning" / "objective_trial.py"
    trial_pool = {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": 1,
        "container_spec": {
            "image_uri": "example.com/t:latest",
            "command": [sys.executable, str(trial_script)],
        },
    }
    job = types.HyperparameterTuningJob(
        display_name="tuned-logs",
        study_spec={
            "metrics": [{"metric_id": "score", "goal": "MAXIMIZE"}],
            "parameters": [{"parameter_id": "x", "double_value_spec": {"min_value": 0.0, "max_value": 1.0}}],
            "algorithm": "RANDOM_SEARCH",
        },
        max_trial_count=2,
        parallel_trial_count=2,
        trial_job_spec={"worker_pool_specs": [trial_pool]},
    )
    name = job_client.create_hyperparameter_tuning_job(parent=PARENT, hyperparameter_tuning_job=job).name
    deadline = time.monotonic() + 120
    while job_client.get_hyperparameter_tuning_job(name=name).state.name != "JOB_STATE_SUCCEEDED":
        assert time.monotonic() < deadline, "the tuning job did not succeed"
        time.sleep(0.1)
    code, out, err = cli("logs", name, "--json")
    assert code == 0, err
    starts = {
        r["replica"]: r["line"] for r in map(json.loads, out.splitlines()) if r["line"].startswith("trial ")
    }
    assert set(starts) == {"trial-1/workerpool0-0", "trial-2/workerpool0-0"}
    assert starts["trial-2/workerpool0-0"].startswith("trial 2 args ['--x=")
    code, out, _ = cli("logs", name, "--trial", "2")
    assert code == 0 and out and all(line.startswith("[trial-2/workerpool0-0] ") for line in out.splitlines())


def post(emu: Emulator, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{emu.vertex_endpoint}/v2/entries:list", data=json.dumps(body).encode(), method="POST"
    )
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as answer:
        return dict(json.loads(answer.read()))


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"filter": 'resource.labels.job_id="1" OR severity>=ERROR'}, "cannot read the filter term"),
        ({"filter": "severity>=ERROR"}, "one job at a time"),
        ({"filter": 'resource.labels.job_id="1"', "pageSize": 5000}, "pageSize"),
        ({"filter": 'resource.labels.job_id="1"', "orderBy": "severity"}, "orderBy"),
        ({"filter": 'resource.labels.job_id="1"', "pageToken": "garbage"}, "pageToken"),
        ({"filter": 'resource.labels.job_id="1"', "projectIds": ["x"]}, "Unknown name"),
        ({"filter": 'resource.labels.job_id="1"', "resourceNames": ["organizations/1"]}, "projects/PROJECT"),
    ],
)
def test_requests_the_emulator_cannot_serve_are_400_naming_why(
    emu: Emulator, body: dict[str, Any], says: str
) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        post(emu, {"resourceNames": [f"projects/{PROJECT}"], **body})
    assert refused.value.code == 400
    assert says in json.loads(refused.value.read())["error"]["message"]


def test_the_real_client_sees_a_refused_filter_as_bad_request(emu: Emulator) -> None:
    from google.api_core import exceptions

    with pytest.raises(exceptions.BadRequest, match="cannot read the filter term"):
        list(logging_client(emu).list_entries(filter_='resource.labels.job_id="1" AND textPayload:"x"'))
