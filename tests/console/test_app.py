"""The console's pages and reads over real run folders (local jobs of stand-in replicas), through
Starlette's test client and, for raw request paths, through uvicorn itself; its security rules."""

from __future__ import annotations

import json
import socket
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("starlette")

from starlette.testclient import TestClient

from vertexdist.console.app import build_app
from vertexdist.console.jobs import Console
from vertexdist.console.refs import JobRef, parse_ref

pytestmark = [pytest.mark.integration]

SECRET = "not-for-the-console-7c1e"
HELLO = "import os, sys; print('hello from', os.environ['CLOUD_ML_JOB_ID']); print('oops', file=sys.stderr)"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, kit: Any) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("console-app")
    runs = root / "runs"
    runs.mkdir()
    (root / "secret.txt").write_text(SECRET)  # beside the runs folder: no address may reach it
    ok = kit.run_local_job(runs, [kit.command_pool(HELLO), kit.command_pool(HELLO)], "two-replicas")
    failed = kit.run_local_job(runs, [kit.command_pool("import sys; print('bye'); sys.exit(3)")], "fails")
    return {"root": root, "runs": runs, "ok": ok, "failed": failed}


@pytest.fixture(scope="module")
def console(runs: dict[str, Any]) -> Console:
    return Console(runs["runs"], cache_dir=runs["root"] / "cache")


@pytest.fixture(scope="module")
def client(console: Console) -> TestClient:
    return TestClient(build_app(console, poll_s=0.05), base_url="http://127.0.0.1")


def test_refs_parse_strictly() -> None:
    assert parse_ref("local/local-20240501-120000-ab12") == JobRef("local", "local-20240501-120000-ab12")
    assert parse_ref("local/local-20240501-120000-ab12/trials/3") == JobRef(
        "local", "local-20240501-120000-ab12", "3"
    )
    assert parse_ref("vertex/trainingPipelines/123") == JobRef("vertex", "trainingPipelines/123")
    for bad in (
        "local/../secret.txt",
        "local/local-20240501-120000-ab12/../x",
        "local/local-20240501-120000-ab1",
        "vertex/models/1",
        "vertex/customJobs/1/x",
        "vertex/customJobs/abc",
        "local/local-20240501-120000-ab12/trials/..",
        "",
    ):
        assert parse_ref(bad) is None, bad


def test_list_shows_each_job_with_state_kind_cost(client: TestClient, runs: dict[str, Any]) -> None:
    page = client.get("/")
    assert page.status_code == 200
    text = page.text
    for job in (runs["ok"], runs["failed"]):
        assert f'href="/jobs/local/{job}"' in text
    assert "SUCCEEDED" in text and "FAILED" in text and "custom job" in text
    assert "$0." in text  # n1-standard-4 in us-central1 is in the price table
    data = client.get("/api/jobs").json()
    by_ref = {row["ref"]: row for row in data["jobs"]}
    ok = by_ref[f"local/{runs['ok']}"]
    assert ok["state"] == "SUCCEEDED" and ok["kind"] == "custom job" and ok["where"] == "local"
    assert ok["cost"] is not None and ok["cost"] > 0 and ok["durationS"] is not None


def test_list_filters(client: TestClient, runs: dict[str, Any]) -> None:
    failed = client.get("/", params={"state": "FAILED"}).text
    assert runs["failed"] in failed and runs["ok"] not in failed
    named = client.get("/", params={"q": "two-rep"}).text
    assert runs["ok"] in named and runs["failed"] not in named
    managed = client.get("/", params={"kind": "managed"}).text
    assert 'id="managed-placeholder"' in managed and runs["ok"] not in managed
    assert client.get("/", params={"page": "x", "state": "<script>"}).status_code == 200


def test_job_page_replicas_exit_codes_timeline(client: TestClient, runs: dict[str, Any]) -> None:
    page = client.get(f"/jobs/local/{runs['failed']}")
    assert page.status_code == 200
    assert 'data-replica="workerpool0-0"' in page.text
    row = page.text.split('data-replica="workerpool0-0"', 1)[1].split("</tr>", 1)[0]
    assert "FAILED" in row and '<td class="num exit">3</td>' in row
    assert "exit code 3" in page.text  # the timeline's replica step
    two = client.get(f"/jobs/local/{runs['ok']}").text
    assert 'data-replica="workerpool1-0"' in two and "n1-standard-4" in two
    status = client.get(f"/api/status/local/{runs['failed']}").json()
    assert status["state"] == "FAILED" and status["done"] is True
    assert [(r["name"], r["exit_code"]) for r in status["replicas"]] == [("workerpool0-0", 3)]


def _events(text: str) -> list[tuple[str, Any]]:
    found = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        found.append((lines["event"], json.loads(lines["data"])))
    return found


def test_log_stream_of_a_finished_job_ends(client: TestClient, runs: dict[str, Any]) -> None:
    with client.stream("GET", f"/api/logs/local/{runs['ok']}") as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        events = _events(answer.read().decode())
    lines = [line for name, data in events if name == "lines" for line in data]
    assert {(line["r"], line["s"], line["x"]) for line in lines} >= {
        ("workerpool0-0", "INFO", f"hello from {runs['ok']}"),
        ("workerpool1-0", "ERROR", "oops"),
    }
    assert events[-1] == ("end", {"state": "SUCCEEDED"})
    status = next(data for name, data in events if name == "status")
    assert [r["state"] for r in status["replicas"]] == ["SUCCEEDED", "SUCCEEDED"]


def test_log_stream_filters(client: TestClient, runs: dict[str, Any]) -> None:
    path = f"/api/logs/local/{runs['ok']}"
    with client.stream("GET", path, params={"replica": "workerpool1-0", "severity": "ERROR"}) as answer:
        events = _events(answer.read().decode())
    lines = [line for name, data in events if name == "lines" for line in data]
    assert lines and {(line["r"], line["s"]) for line in lines} == {("workerpool1-0", "ERROR")}
    assert client.get(path, params={"severity": "LOUD"}).status_code == 400


def test_metrics_of_a_job_without_scalars(client: TestClient, runs: dict[str, Any]) -> None:
    assert client.get(f"/api/metrics/local/{runs['ok']}").json() == {"series": []}


BAD_PATHS = [
    "/jobs/local/../secret.txt",
    "/jobs/local/..%2Fsecret.txt",
    "/jobs/local/%2e%2e/secret.txt",
    "/jobs/local/local-20240501-120000-ab12",  # well formed, no such run
    "/jobs/local/{ok}/..%2F..%2Fsecret.txt",
    "/jobs/local/{ok}%2F..%2F..%2Fsecret.txt",
    "/api/logs/local/..%2F..%2Fsecret.txt",
    "/api/metrics/local/{ok}/trials/1",
    "/api/status/vertex/customJobs/1",  # no Vertex target here
    "/api/ranks/vertex/customJobs/1",
    "/api/ranks/local/..%2F..%2Fsecret.txt",
    "/static/../app.py",
    "/static/..%2fapp.py",
    "/static/%2e%2e/%2e%2e/secret.txt",
    "/static/vendor/..%2F..%2F..%2Fconsole%2Fapp.py",
    "/jobs/",
    "/jobs/local/{ok}/",
    "/jobs//etc/passwd",
    "/pipelines/run-1",  # a pipeline id, no Vertex target here
    "/pipelines/..%2F..%2Fsecret.txt",
    "/pipelines/%2e%2e",
    "/api/pipelines/Not_An_Id",
    "/api/pipelines/run-1/tasks",
]


def _raw_get(base: str, path: str) -> tuple[int, bytes]:
    """GET `path` exactly as written (no client normalising it) from the uvicorn server at `base`."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1]), data


def test_traversal_odd_ids_encoded_slashes_get_404(console: Console, runs: dict[str, Any], kit: Any) -> None:
    app_source = Path(__file__).resolve().parents[2] / "vertexdist" / "console" / "app.py"
    with kit.serving(build_app(console, allowed_hosts=["127.0.0.1"])) as base:
        for raw in BAD_PATHS:
            path = raw.format(ok=runs["ok"])
            status, body = _raw_get(base, path)
            assert status in (400, 404), (path, status)
            assert SECRET.encode() not in body and b"def build_app" not in body, path
        assert app_source.is_file()
        status, _ = _raw_get(base, f"/jobs/local/{runs['ok']}")
        assert status == 200


def test_host_header_and_token(console: Console, runs: dict[str, Any]) -> None:
    loopback = TestClient(
        build_app(console, allowed_hosts=["127.0.0.1", "localhost"]), base_url="http://evil.example"
    )
    assert loopback.get("/").status_code == 400
    gated = TestClient(build_app(console, token="s3cret"), base_url="http://10.0.0.5:8686")
    assert gated.get("/").status_code == 401
    assert gated.get(f"/api/status/local/{runs['ok']}").status_code == 401
    assert gated.get("/", params={"token": "wrong"}).status_code == 401
    entered = gated.get("/", params={"token": "s3cret", "state": "FAILED"}, follow_redirects=False)
    assert entered.status_code == 303 and entered.headers["location"] == "/?state=FAILED"
    assert "HttpOnly" in entered.headers["set-cookie"]
    assert gated.get("/?state=FAILED").status_code == 200  # the cookie from now on
    bearer = TestClient(build_app(console, token="s3cret"), base_url="http://10.0.0.5:8686")
    assert bearer.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    prefix=st.sampled_from(["/", "/jobs/", "/jobs/local/", "/jobs/vertex/", "/api/logs/", "/api/status/",
                            "/api/metrics/", "/api/jobs", "/static/", "/pipelines/",
                            "/api/pipelines/"]),
    tail=st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r\n#?"), max_size=40),
    query=st.dictionaries(
        st.sampled_from(["state", "kind", "where", "q", "page", "replica", "severity", "token"]),
        st.text(max_size=30),
        max_size=4,
    ),
)  # fmt: skip
def test_no_route_answers_500_to_fuzzed_requests(
    client: TestClient, runs: dict[str, Any], prefix: str, tail: str, query: dict[str, str]
) -> None:
    # Percent-encoded as a browser would send it; `%` left as is, so broken escapes are sent too.
    path = prefix + urllib.parse.quote(tail, safe="/%:@!$&'()*+,;=~")
    with client.stream("GET", path, params=query) as answer:
        body = answer.read()
    assert answer.status_code < 500, (path, query, answer.status_code)
    assert SECRET.encode() not in body


def _write_beats(health: Path) -> None:
    """Three ranks' heartbeats, as their watchers write them (`Watcher.write_beat`): rank 1 loads data at
    step 6 while ranks 0 and 2 wait in the all-reduce at step 8; rank 2's steps take four times as long."""
    from vertexdist.shipped.vertexdist_launcher import health as watcher

    now = time.time()
    for rank, steps, step_s, state in (
        (0, 8, 0.1, "waiting"),
        (1, 6, 0.1, "loading"),
        (2, 8, 0.4, "waiting"),
    ):
        spec = {"task": {"type": f"workerpool{min(rank, 1)}", "index": max(rank - 1, 0)}}
        env = {
            watcher.DIR_VARIABLE: str(health),
            "RANK": str(rank),
            "LOCAL_RANK": "0",
            "WORLD_SIZE": "3",
            "CLUSTER_SPEC": json.dumps(spec),
        }
        w = watcher.Watcher(env)
        w.steps, w.first_step_at, w.last_step_at = steps, now - 100, now - 60
        w.durations.extend([step_s] * steps)
        w.last = {"state": state, "where": f"step_{rank} (train.py:{rank + 10})", "what": "", "at": ""}
        w.write_beat()


def test_ranks_panel_data(client: TestClient, runs: dict[str, Any]) -> None:
    from vertexdist.health.folder import read_beats
    from vertexdist.health.verdict import hang_verdict

    health = runs["runs"] / runs["failed"] / "health"
    _write_beats(health)
    verdict = hang_verdict(read_beats(health), time.time(), 30.0)
    assert verdict is not None
    (health / "verdict.json").write_text(json.dumps({"verdict": verdict, "at": time.time()}))

    data = client.get(f"/api/ranks/local/{runs['failed']}").json()
    assert data["note"] == "" and data["verdict"] == verdict
    assert data["columns"][:4] == ["RANK", "REPLICA", "LOCAL", "STEP"]
    rows = {r["rank"]: r for r in data["rows"]}
    assert sorted(rows) == [0, 1, 2]
    assert rows[1]["cells"][:4] == ["1", "workerpool1-0", "0", "6"]
    assert rows[1]["cells"][8:10] == ["loading", "step_1 (train.py:11)"]
    assert [r for r in rows if rows[r]["culprit"]] == [1]  # the hung job's culprit: the rank not waiting
    assert [r for r in rows if rows[r]["straggler"]] == [2]
    assert rows[2]["cells"][-1] == "yes (4x)" and rows[2]["own_step_s"] == 0.4
    assert rows[0]["step"] == 8

    # A job whose ranks left no heartbeats: no rows, no note; an unknown job: 404.
    empty = client.get(f"/api/ranks/local/{runs['ok']}").json()
    assert empty["rows"] == [] and empty["verdict"] is None
    assert client.get("/api/ranks/local/local-20240501-120000-ab12").status_code == 404


def test_a_local_jobs_page_shows_where_its_money_went(client: TestClient, runs: dict[str, Any]) -> None:
    from vertexdist.local.events import read_events
    from vertexdist.shipped.vertexdist_launcher import health as watcher

    run_dir = runs["runs"] / runs["ok"]
    events = [e for e in read_events(run_dir) if e.replica == "workerpool0-0"]
    start, end = events[0].time, events[-1].time
    env = {watcher.DIR_VARIABLE: str(run_dir / "health"), "RANK": "0", "WORLD_SIZE": "1"}
    w = watcher.Watcher(env)  # rank 0 on workerpool0-0: steps over the middle half of its replica's time
    w.steps, w.first_step_at, w.last_step_at = 10, start + (end - start) / 4, end - (end - start) / 4
    w.write_beat()

    page = client.get(f"/jobs/local/{runs['ok']}").text
    assert 'id="goodput-bar"' in page
    bar = page.split('id="goodput-bar"', 1)[1].split("</div>", 1)[0]
    assert 'class="gp-startup"' in bar and 'class="gp-productive"' in bar and 'class="gp-tail"' in bar
    assert "vertexdist goodput " + runs["ok"] in page
    failed = client.get(f"/jobs/local/{runs['failed']}").text
    assert "Goodput" in client.get("/").text and 'id="goodput-bar"' in failed  # all its time start-up
