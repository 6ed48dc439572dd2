"""Benchmark: TensorBoard writes on the emulator cost what they add (issue 41).

Run: .venv/bin/python bench/bench_tensorboard.py [--writes 1000] [--points 100] [--runs 20]
     [--run-points 1000]
1. 1,000 writes (`runs/R:write`, as the SDK's `log_time_series_metrics` and TensorBoard uploader send them)
   of 100 points each into one time series: a write's time, its last ones against its first ones (goal:
   the median of the last 20 within 2x the median of the first 20). Before: each write rewrote the whole
   series, so ten writes of 100,000 points went from 4.9 s to 38 s a call.
2. Meanwhile, in another thread, `aiplatform.get_experiment_df` of an experiment of 20 runs of 1,000 points
   each, again and again (goal: each under 1 s; before, Experiments calls stalled 15-23 s behind a write).
3. Where a `get_experiment_df` goes, once the writes are done: the whole call; the same requests sent one at
   a time over HTTP; and the emulator's own share, those requests answered in process (its routes and JSON,
   `ExperimentsApi.answer`), as ratios of the whole call.

The emulator runs in a process of its own, as `vertexdist emulator start` does, so the SDK's own work (it
parses every point it reads) does not share a GIL with the server's.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

PROJECT, LOCATION, BUCKET = "bench-proj", "us-central1", "bench-tb"
EXPERIMENT = "bench-tb"


def _series_of(client: Any, run: str) -> str:
    (series,) = client.list_tensorboard_time_series(parent=run)
    return str(series.name)


def _write(port: int, run: str, ident: str, first_step: int, count: int) -> float:
    """One `runs/R:write` of `count` points; its seconds."""
    stamp = "2026-01-01T00:00:00Z"
    values = [
        {"step": str(first_step + i), "wallTime": stamp, "scalar": {"value": i * 0.5}} for i in range(count)
    ]
    body = json.dumps(
        {"timeSeriesData": [{"tensorboardTimeSeriesId": ident, "valueType": "SCALAR", "values": values}]}
    )
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    start = time.perf_counter()
    connection.request("POST", f"/v1/{run}:write", body, {"Content-Type": "application/json"})
    answer = connection.getresponse()
    answer.read()
    seconds = time.perf_counter() - start
    connection.close()
    assert answer.status == 200, answer.status
    return seconds


_SERVE = """
import sys
from vertexdist.emulator import Emulator
emu = Emulator(data_dir=sys.argv[1]).start()
print(emu.vertex_endpoint, emu.storage_endpoint, flush=True)
sys.stdin.read()
emu.stop()
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--points", type=int, default=100)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--run-points", type=int, default=1000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-tb-"))
    import subprocess
    import sys

    from google.auth.credentials import AnonymousCredentials
    from google.cloud import aiplatform, aiplatform_v1, storage

    server = subprocess.Popen(
        [sys.executable, "-c", _SERVE, str(work / "emu")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None and server.stdin is not None
    vertex_endpoint, storage_endpoint = server.stdout.readline().split()
    try:
        os.environ["STORAGE_EMULATOR_HOST"] = storage_endpoint
        storage.Client(project=PROJECT).create_bucket(BUCKET)
        aiplatform.init(
            project=PROJECT,
            location=LOCATION,
            staging_bucket=f"gs://{BUCKET}/stage",
            credentials=AnonymousCredentials(),
            api_endpoint=vertex_endpoint,
            api_transport="rest",
        )
        client = aiplatform_v1.TensorboardServiceClient(
            transport="rest",
            client_options={"api_endpoint": vertex_endpoint},
            credentials=AnonymousCredentials(),
        )
        tensorboard = aiplatform.Tensorboard.create(display_name="bench")
        aiplatform.init(experiment=EXPERIMENT, experiment_tensorboard=tensorboard)
        port = int(vertex_endpoint.rsplit(":", 1)[1])
        for index in range(args.runs + 1):  # the experiment's runs, and the writer's
            with aiplatform.start_run(f"run-{index}"):
                aiplatform.log_time_series_metrics({"loss": 1.0}, step=0)
        (experiment,) = client.list_tensorboard_experiments(parent=tensorboard.resource_name)
        runs = {r.display_name: r.name for r in client.list_tensorboard_runs(parent=experiment.name)}
        for index in range(args.runs):
            tb_run = runs[f"run-{index}"]
            _write(port, tb_run, _series_of(client, tb_run).rsplit("/", 1)[1], 1, args.run_points - 1)
        tb_run = runs[f"run-{args.runs}"]
        series = _series_of(client, tb_run)
        ident = series.rsplit("/", 1)[1]

        frames: list[float] = []
        stop = threading.Event()

        def read_frames() -> None:
            while not stop.is_set():
                start = time.perf_counter()
                frame = aiplatform.get_experiment_df(EXPERIMENT)
                frames.append(time.perf_counter() - start)
                assert len(frame) == args.runs + 1, len(frame)

        reader = threading.Thread(target=read_frames, daemon=True)
        reader.start()
        writes = [_write(port, tb_run, ident, 1 + i * args.points, args.points) for i in range(args.writes)]
        stop.set()
        reader.join(timeout=60)
        read = client.read_tensorboard_time_series_data(tensorboard_time_series=series)
        assert len(read.time_series_data.values) <= 1000  # a read is bounded, as Vertex's is
        whole, sent = _one_call_and_its_requests(aiplatform)
        one_by_one = _over_http(sent)
    finally:
        server.stdin.close()
        server.wait(timeout=60)
    in_process, spaced = _in_process(work / "emu", sent)

    head, tail = statistics.median(writes[:20]), statistics.median(writes[-20:])
    print(f"== 1. {args.writes} writes of {args.points} points into one time series")
    print(f"   first 20: median {head * 1e3:.2f} ms; last 20: median {tail * 1e3:.2f} ms")
    print(f"   ratio last / first (goal <= 2): {tail / head:.2f}")
    print(
        f"== 2. get_experiment_df of {args.runs} runs x {args.run_points} points, meanwhile:"
        f" {len(frames)} calls"
    )
    if frames:
        print(f"   median {statistics.median(frames):.3f} s, slowest {max(frames):.3f} s (goal < 1 s)")
    print(f"== 3. one get_experiment_df alone: {whole:.3f} s, {len(sent)} requests")
    print(f"   the same requests one at a time over HTTP: {one_by_one / whole:.2f}x the call")
    print(f"   the emulator's share (its routes and JSON, in process): {in_process / whole:.3f}x the call")
    print(f"   its share with spaced JSON, as before: {spaced / whole:.3f}x ({in_process / spaced:.2f}x now)")


Sent = list[tuple[str, str, list[tuple[str, str]]]]


def _one_call_and_its_requests(aiplatform: Any) -> tuple[float, Sent]:
    """One `get_experiment_df` (seconds) and the requests the SDK sent for it (method, URL, params)."""
    import requests

    sent: Sent = []
    original = requests.Session.request
    lock = threading.Lock()

    def recording(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        params = kwargs.get("params") or []
        with lock:
            sent.append((method, url, [(str(k), str(v)) for k, v in dict(params).items()] if params else []))
        return original(self, method, url, *args, **kwargs)

    requests.Session.request = recording
    try:
        start = time.perf_counter()
        aiplatform.get_experiment_df(EXPERIMENT)
        return time.perf_counter() - start, sent
    finally:
        requests.Session.request = original


def _over_http(sent: Sent) -> float:
    import requests

    session = requests.Session()
    start = time.perf_counter()
    for method, url, params in sent:
        session.request(method, url, params=params).raise_for_status()
    return time.perf_counter() - start


def _in_process(data_dir: Path, sent: Sent) -> tuple[float, float]:
    """The emulator's own work for `sent`: each request's route and its answer's JSON, as its server does."""
    import urllib.parse

    from vertexdist.emulator.vertex.experiments import ExperimentsApi

    api = ExperimentsApi(data_dir)

    def replay(separators: tuple[str, str] | None) -> float:
        start = time.perf_counter()
        for method, url, params in sent:
            parts = urllib.parse.urlsplit(url)
            answer = api.answer(method, parts.path, urllib.parse.urlencode(params) or parts.query, dict)
            assert answer is not None, url
            json.dumps(answer, separators=separators).encode()
        return time.perf_counter() - start

    replay(None)  # a served emulator has read its series' files already: so has this one, after this pass
    return replay((",", ":")), replay(None)  # as served now (compact JSON), and as before (spaced)


if __name__ == "__main__":
    main()
