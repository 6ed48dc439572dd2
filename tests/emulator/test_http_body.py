"""Pure parts of the front end: reading one body from a stream, parsing it, and the JSON type checks."""

from __future__ import annotations

import io
from email.message import Message

import pytest

from vertexdist.emulator.http_body import MAX_JSON_DEPTH, BodyError, parse_json_object, read_body
from vertexdist.wire import shapes
from vertexdist.wire.proto_json import custom_job_spec_from_task_inputs


def headers(**values: str | list[str]) -> Message:
    message = Message()
    for name, value in values.items():
        for one in value if isinstance(value, list) else [value]:
            message[name.replace("_", "-")] = one
    return message


def test_a_body_is_read_to_its_length_and_no_further() -> None:
    stream = io.BytesIO(b'{"a": 1}GET /next HTTP/1.1\r\n')
    assert read_body("POST", headers(Content_Length="8"), stream) == b'{"a": 1}'
    assert stream.read() == b"GET /next HTTP/1.1\r\n"


def test_repeated_equal_lengths_are_one_length_and_different_ones_are_400() -> None:
    assert read_body("POST", headers(Content_Length=["2", "2"]), io.BytesIO(b"{}")) == b"{}"
    with pytest.raises(BodyError) as caught:
        read_body("POST", headers(Content_Length=["2", "3"]), io.BytesIO(b"{}"))
    assert caught.value.status == 400 and caught.value.close


def test_a_get_without_a_length_has_no_body_and_a_post_needs_one() -> None:
    assert read_body("GET", headers(), io.BytesIO(b"GET / HTTP/1.1\r\n")) == b""
    with pytest.raises(BodyError) as caught:
        read_body("POST", headers(), io.BytesIO(b""))
    assert caught.value.status == 411


def test_the_limit_is_checked_before_reading() -> None:
    class Unreadable(io.RawIOBase):
        def read(self, size: int = -1) -> bytes:
            raise AssertionError("read past a refused length")

    with pytest.raises(BodyError) as caught:
        read_body("POST", headers(Content_Length="11"), Unreadable(), limit=10)
    assert caught.value.status == 413


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b"[1]", "must be a JSON object"),
        (b'{"a": NaN}', "not valid JSON"),
        (b"\xff{}", "not valid JSON"),
        (b'{"a":' * (MAX_JSON_DEPTH + 1) + b"1" + b"}" * (MAX_JSON_DEPTH + 1), "deeper than 100"),
    ],
)
def test_bodies_that_are_not_one_json_object(raw: bytes, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_json_object(raw)


def test_nesting_up_to_the_limit_is_fine() -> None:
    depth = MAX_JSON_DEPTH
    assert parse_json_object(b'{"a":' * depth + b"1" + b"}" * depth)


def test_shapes_take_proto_json_forms() -> None:
    body = {
        "displayName": "x",
        "labels": {"a": "b"},
        "jobSpec": {"workerPoolSpecs": [{"replicaCount": "2", "machineSpec": {"acceleratorType": 5}}]},
        "unknownField": [1, 2],
        "network": None,
    }
    assert shapes.problems(body, shapes.CUSTOM_JOB, "customJob") == []
    assert shapes.problems({"workerPoolSpecs": [{"replicaCount": 2.0}]}, shapes.CUSTOM_JOB_SPEC) == []


def test_shapes_name_every_wrong_field() -> None:
    spec = {"workerPoolSpecs": [{"replicaCount": True, "containerSpec": {"command": "python"}}, None]}
    assert shapes.problems(spec, shapes.CUSTOM_JOB_SPEC, "jobSpec") == [
        "jobSpec.workerPoolSpecs[0].containerSpec.command: expected a list, got 'python'",
        "jobSpec.workerPoolSpecs[0].replicaCount: expected an integer, got True",
        "jobSpec.workerPoolSpecs[1]: a list cannot hold null",
    ]


def test_snake_case_task_inputs_are_checked_once_camel_cased() -> None:
    with pytest.raises(ValueError, match=r"workerPoolSpecs\[0\]\.machineSpec: expected an object"):
        custom_job_spec_from_task_inputs({"worker_pool_specs": [{"machine_spec": "n1-standard-4"}]})
