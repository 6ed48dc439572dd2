"""The emulator's HTTP front end under hostile input: raw requests over a socket, as broken clients send.

One emulator for this module. Each check reads the answer with http.client and, when the connection is
kept alive, sends a normal request on it: an unread body would make that one fail (`Bad request syntax`).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vertexdist.emulator import Emulator
from vertexdist.emulator.http_body import MAX_BODY_BYTES, MAX_JSON_DEPTH

PARENT = "projects/fuzz-proj/locations/us-central1"
FOLLOW_UP = f"GET /v1/{PARENT}/customJobs HTTP/1.1\r\nHost: e\r\nContent-Length: 0\r\n\r\n".encode()


@pytest.fixture(scope="module")
def front() -> Iterator[Emulator]:
    emu = Emulator()
    emu.start()
    try:
        yield emu
    finally:
        emu.stop()


@dataclass
class Answer:
    status: int
    body: bytes
    closes: bool
    follow_up: int | None  # status of a normal request sent next on the same connection, if kept alive


def exchange(emu: Emulator, raw: bytes, method: str, *, end_writes: bool = False) -> Answer:
    host = f"Host: 127.0.0.1:{emu.http.port}\r\n".encode()  # the guard answers its own address only
    raw = raw.replace(b"Host: emulator\r\n", host, 1)
    with socket.create_connection(("127.0.0.1", emu.http.port), timeout=20) as sock:
        sock.sendall(raw)
        if end_writes:
            with contextlib.suppress(OSError):  # the server may have answered and closed already
                sock.shutdown(socket.SHUT_WR)
        first = http.client.HTTPResponse(sock, method=method)
        first.begin()
        body = first.read()
        follow_up = None
        if not first.will_close and not end_writes:
            sock.sendall(FOLLOW_UP.replace(b"Host: e\r\n", host, 1))
            second = http.client.HTTPResponse(sock, method="GET")
            second.begin()
            second.read()
            follow_up = second.status
        return Answer(first.status, body, bool(first.will_close), follow_up)


def request(method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: emulator"]
    given = {"Content-Length": str(len(body))} if headers is None else headers
    given = {"Content-Type": "application/json", **given}  # what the SDK sends on every call
    lines += [f"{k}: {v}" for k, v in given.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def error_message(answer: Answer) -> str:
    return str(json.loads(answer.body)["error"]["message"])


@pytest.mark.parametrize("length", ["abc", "-1", "1.5", "0x10", "5, 6", ""])
def test_a_malformed_content_length_is_400_and_closes(front: Emulator, length: str) -> None:
    raw = request("POST", f"/v1/{PARENT}/customJobs", headers={"Content-Length": length})
    answer = exchange(front, raw + b"{}", "POST")
    assert answer.status == 400 and answer.closes
    assert "Content-Length" in error_message(answer)


def test_a_huge_announced_body_is_413_before_any_of_it_is_sent(front: Emulator) -> None:
    raw = request("POST", f"/v1/{PARENT}/customJobs", headers={"Content-Length": str(4 * 1024**3)})
    started = time.monotonic()
    answer = exchange(front, raw, "POST")  # nothing of the 4 GB follows: it must not wait for it
    assert answer.status == 413 and answer.closes
    assert str(MAX_BODY_BYTES) in error_message(answer)
    assert time.monotonic() - started < 10


def _virtual_memory_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize in /proc/self/status")


def test_clients_announcing_4_gb_cost_the_server_no_memory(front: Emulator) -> None:
    # The emulator runs in this process: before, each of these grew it by the announced 4 GB.
    before = _virtual_memory_bytes()
    raw = request("POST", f"/v1/{PARENT}/customJobs", headers={"Content-Length": str(4 * 1024**3)})
    raw = raw.replace(b"Host: emulator", f"Host: 127.0.0.1:{front.http.port}".encode(), 1)
    clients = [socket.create_connection(("127.0.0.1", front.http.port), timeout=20) for _ in range(3)]
    try:
        for sock in clients:
            sock.sendall(raw + b"x" * 1024)
        time.sleep(0.5)
        assert _virtual_memory_bytes() - before < 1024**3
        for sock in clients:
            answer = http.client.HTTPResponse(sock, method="POST")
            answer.begin()
            assert answer.status == 413
    finally:
        for sock in clients:
            sock.close()


def test_a_body_just_over_the_limit_is_413_and_one_at_the_limit_is_read(front: Emulator) -> None:
    over = request("POST", f"/v1/{PARENT}/customJobs", b"x" * (MAX_BODY_BYTES + 1))
    assert exchange(front, over, "POST").status == 413
    at = request("POST", f"/v1/{PARENT}/customJobs", b" " * (MAX_BODY_BYTES - 2) + b"{}")
    answer = exchange(front, at, "POST")
    assert answer.status == 400 and "displayName" in error_message(answer)
    assert answer.follow_up == 200


def test_a_post_without_a_length_is_411(front: Emulator) -> None:
    answer = exchange(front, request("POST", f"/v1/{PARENT}/customJobs", headers={}), "POST")
    assert answer.status == 411 and "Content-length" in error_message(answer)
    chunked = request("POST", f"/v1/{PARENT}/customJobs", headers={"Transfer-Encoding": "chunked"})
    assert exchange(front, chunked + b"2\r\n{}\r\n0\r\n\r\n", "POST").status == 411


def test_very_deep_json_is_400(front: Emulator) -> None:
    for depth in (MAX_JSON_DEPTH + 1, 100_000):
        body = b'{"a":' * depth + b"1" + b"}" * depth
        answer = exchange(front, request("POST", f"/v1/{PARENT}/customJobs", body), "POST")
        assert answer.status == 400 and "deeper than" in error_message(answer)
        assert answer.follow_up == 200


def test_a_body_that_ends_early_is_400(front: Emulator) -> None:
    raw = request("POST", f"/v1/{PARENT}/customJobs", headers={"Content-Length": "100"}) + b'{"a"'
    answer = exchange(front, raw, "POST", end_writes=True)
    assert answer.status == 400 and "ended after 4 of 100 bytes" in error_message(answer)


def test_an_unknown_route_reads_its_body_so_keep_alive_stays_in_step(front: Emulator) -> None:
    answer = exchange(front, request("POST", "/v1/no/such/route", b'{"displayName": "x"}'), "POST")
    assert answer.status == 404 and not answer.closes
    assert answer.follow_up == 200


@pytest.mark.parametrize(
    "body",
    [
        {"displayName": 5, "jobSpec": {}},
        {"displayName": "x", "labels": ["a"]},
        {"displayName": "x", "jobSpec": []},
        {"displayName": "x", "jobSpec": {"workerPoolSpecs": 3}},
        {"displayName": "x", "jobSpec": {"worker_pool_specs": [{"machine_spec": "n1-standard-4"}]}},
        {"displayName": "x", "jobSpec": {"workerPoolSpecs": [{"replicaCount": "many"}]}},
        {"displayName": "x", "jobSpec": {"workerPoolSpecs": [{"containerSpec": {"env": [{"name": 1}]}}]}},
    ],
)
def test_wrong_json_types_are_400_naming_the_field(front: Emulator, body: dict[str, object]) -> None:
    raw = request("POST", f"/v1/{PARENT}/customJobs", json.dumps(body).encode())
    answer = exchange(front, raw, "POST")
    assert answer.status == 400, answer.body
    assert "expected" in error_message(answer)


def test_bad_extension_input_is_400(front: Emulator) -> None:
    for fault in ({"method": "create"}, {"method": "create", "status": "x"}, {"method": 1, "status": 503}):
        raw = request("POST", "/vertexdist/v1/faults", json.dumps(fault).encode())
        assert exchange(front, raw, "POST").status == 400


_ROUTES = [
    f"/v1/{PARENT}/customJobs",
    f"/v1/{PARENT}/trainingPipelines",
    f"/v1beta1/{PARENT}/customJobs/123",
    f"/v1/{PARENT}/customJobs/123:cancel",
    f"/v1/{PARENT}/trainingPipelines/9:cancel",
    "/v1/projects/p/locations/nowhere/customJobs",
    "/v2/entries:list",
    "/vertexdist/v1/faults",
    "/",
    "//x/../y",
    "/v1/%ff%00%0d%0a",
]
_KEYS = [
    "displayName", "labels", "jobSpec", "workerPoolSpecs", "worker_pool_specs", "machineSpec", "machineType",
    "acceleratorType", "acceleratorCount", "replicaCount", "containerSpec", "pythonPackageSpec", "imageUri",
    "command", "args", "env", "name", "value", "packageUris", "scheduling", "timeout", "strategy",
    "baseOutputDirectory", "outputUriPrefix", "trainingTaskDefinition", "trainingTaskInputs", "method",
    "status", "times", "after", "resourceNames", "filter", "orderBy", "pageSize", "pageToken",
]  # fmt: skip
_leaves = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
    | st.sampled_from(["n1-standard-4x", "NVIDIA_L4", "1", "gs://b/p", "3600s", "SPOT", "projects/fuzz-proj",
                       'resource.labels.job_id="1" AND severity>=ERROR', 'timestamp>="x"', "timestamp asc"])
)  # fmt: skip
_json = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=6), inner, max_size=5)
    ),
    max_leaves=25,
)
_bodies = (
    st.binary(max_size=120)
    | _json.map(lambda v: json.dumps(v).encode())
    | st.dictionaries(st.sampled_from(_KEYS), _json, max_size=6).map(lambda v: json.dumps(v).encode())
    | st.integers(1, 200_000).map(lambda n: b"[" * n + b"]" * n)
    | st.sampled_from([b"NaN", b'{"a": Infinity}', b'{"a": 1' + b"0" * 5000 + b"}", b"\xff\xfe{}"])
)
_token = st.text(alphabet=st.characters(min_codepoint=65, max_codepoint=90), min_size=1, max_size=8)
_query = st.dictionaries(
    st.sampled_from(["pageSize", "pageToken", "filter", "$alt", "x"]),
    st.text(
        alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="&#%+"), max_size=12
    ),
    max_size=3,
)
_header_value = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=30)


@st.composite
def raw_requests(draw: st.DrawFn) -> tuple[bytes, str, bool]:
    """(request bytes, method, whether the client stops writing after them)."""
    method = draw(st.sampled_from(["GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"]) | _token)
    path = draw(st.sampled_from(_ROUTES))
    query = draw(_query)
    if query:
        path += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    body = draw(_bodies)
    framing = draw(
        st.sampled_from(["exact", "exact", "exact", "none", "garbage", "huge", "short", "chunked"])
    )
    headers = {f"X-{draw(_token)}": draw(_header_value) for _ in range(draw(st.integers(0, 3)))}
    if draw(st.booleans()):
        headers["Content-Type"] = draw(st.sampled_from(["application/json", "text/plain", "x/y; charset=z"]))
    if draw(st.integers(0, 9)) == 0:
        headers["Expect"] = "100-continue"
    end_writes = framing == "short"
    if framing == "exact":
        headers["Content-Length"] = str(len(body))
    elif framing == "garbage":
        headers["Content-Length"] = draw(st.sampled_from(["x", "-5", "1e3", "9" * 30, " ", "1,2"]))
    elif framing == "huge":
        headers["Content-Length"] = str(draw(st.integers(MAX_BODY_BYTES + 1, 2**63)))
    elif framing == "short":
        headers["Content-Length"] = str(len(body) + draw(st.integers(1, 1000)))
    elif framing == "chunked":
        headers["Transfer-Encoding"] = "chunked"
    elif framing == "none":
        body = b""  # a GET/DELETE without a body; a POST gets 411
    return request(method, path, body, headers), method, end_writes


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_requests())
def test_random_requests_never_get_a_500_and_keep_alive_stays_in_step(
    front: Emulator, case: tuple[bytes, str, bool]
) -> None:
    raw, method, end_writes = case
    answer = exchange(front, raw, method, end_writes=end_writes)
    assert answer.status != 500 and 200 <= answer.status < 600, answer.body[:300]
    assert answer.follow_up in (None, 200)


def test_the_server_still_answers_after_the_fuzzing(front: Emulator) -> None:
    answer = exchange(front, request("GET", f"/v1/{PARENT}/customJobs"), "GET")
    assert answer.status == 200 and "customJobs" in json.loads(answer.body)
    assert front.http._thread is not None and front.http._thread.is_alive()
