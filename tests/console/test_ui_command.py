"""`vertexdist ui` as a user starts it: a real process on a free port, its URL printed; loopback unless
another host is asked for, and then a token; without the `ui` extra, a clear error. And the reads the
console adds to the backends and the price table, checked against what they are read from."""

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

pytest.importorskip("starlette")

from vertexdist.console.serve import is_loopback, plan_serving

pytestmark = [pytest.mark.integration]


def start_ui(cwd: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    """`vertexdist ui ARGS` in `cwd`; the process and the URL it printed."""
    env = {**os.environ, "NO_GCE_CHECK": "true"}
    env.pop("VERTEX_API_ENDPOINT", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "vertexdist", "ui", "--port", "0", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith("vertexdist console: "):
            return process, line.split(": ", 1)[1].strip()
        assert line or process.poll() is None, f"ui exited {process.poll()}"
    process.kill()
    raise AssertionError("no URL printed")


def stop(process: subprocess.Popen[str]) -> int:
    process.send_signal(signal.SIGINT)
    try:
        return process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()
        raise


def get(url: str, **headers: str) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers)
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=20) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def test_serves_on_loopback_and_prints_its_url(tmp_path: Path, kit: Any) -> None:
    runs = tmp_path / ".vertexdist" / "runs"
    runs.mkdir(parents=True)
    job = kit.run_local_job(runs, [kit.command_pool("print('hi')")], "from-the-cli")
    process, url = start_ui(tmp_path)
    try:
        assert url.startswith("http://127.0.0.1:") and "token" not in url
        status, body = get(url)
        assert status == 200 and f"/jobs/local/{job}" in body and "from-the-cli" in body
        port = url.rsplit(":", 1)[1].strip("/")
        status, _ = get(f"http://127.0.0.1:{port}/", Host=f"rebound.example:{port}")
        assert status == 400  # addressed to another name: not answered
    finally:
        assert stop(process) in (0, 130, -signal.SIGINT)


def test_beyond_loopback_only_with_the_printed_token(tmp_path: Path) -> None:
    process, url = start_ui(tmp_path, "--host", "0.0.0.0")
    try:
        assert url.startswith("http://0.0.0.0:") and "?token=" in url
        port = url.split(":")[2].split("/")[0]
        token = url.split("?token=", 1)[1]
        local = f"http://127.0.0.1:{port}"
        assert get(local + "/")[0] == 401
        assert get(local + "/api/jobs")[0] == 401
        assert get(local + "/?token=nope")[0] == 401
        assert get(local + f"/?token={token}")[0] == 303
        status, body = get(local + "/api/jobs", Authorization=f"Bearer {token}")
        assert status == 200 and json.loads(body)["jobs"] == []
    finally:
        stop(process)


def test_without_the_ui_extra_it_says_which_to_install(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    # As where starlette is not installed: importing it fails.
    (shadow / "sitecustomize.py").write_text("import sys\nsys.modules['starlette'] = None\n")
    env = {**os.environ, "PYTHONPATH": f"{shadow}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    argv = [sys.executable, "-m", "vertexdist", "ui"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "error: vertexdist ui needs the `ui` extra (starlette not installed)" in done.stderr
    assert "pip install 'vertexdist[ui]'" in done.stderr


def test_loopback_rules() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.5.0.1", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.0.0.5", "::", "example.com"))
    assert plan_serving("127.0.0.1", 8686).token is None
    beyond = plan_serving("0.0.0.0", 8686)
    assert beyond.token and len(beyond.token) >= 24 and beyond.allowed_hosts is None


def test_cost_so_far_is_the_estimates_price_for_the_time_run() -> None:
    """A submitted job's spec priced per hour is what `estimate` says of the template it came from."""
    from vertexdist.estimate.costs import cost_so_far, estimate_costs, job_spec_costs
    from vertexdist.render import render_job_spec
    from vertexdist.spec.loader import load_template

    template = load_template(Path(__file__).resolve().parents[2] / "job_templates" / "a2-4g-x2.yaml")
    spec = render_job_spec(template, package_uri="gs://b/p.tar.gz")
    expected = estimate_costs(template).per_hour
    assert expected is not None and expected > 0
    assert job_spec_costs(spec, template.location).per_hour == pytest.approx(expected)
    assert cost_so_far(spec, template.location, 1800) == pytest.approx(expected / 2)
    unpriced = {"workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1}]}
    assert cost_so_far(unpriced, "mars-north1", 3600) is None  # no price there: no partial sum


def test_a_finished_jobs_row_is_kept_until_its_files_change(tmp_path: Path, kit: Any) -> None:
    from vertexdist.console.jobs import Console

    runs = tmp_path / "runs"
    runs.mkdir()
    job = kit.run_local_job(runs, [kit.command_pool("print('done')")], "kept")
    console = Console(runs, cache_dir=tmp_path / "cache")
    [first] = console.rows()[0]
    assert first.state == "SUCCEEDED" and console.rows()[0][0] is first
    summary = runs / job / "summary.json"
    data = json.loads(summary.read_text())
    summary.write_text(json.dumps({**data, "state": "JOB_STATE_FAILED", "display_name": "changed!"}))
    (runs / job / "events.jsonl").unlink()
    [again] = console.rows()[0]
    assert again.state == "FAILED" and again.display_name == "changed!"
