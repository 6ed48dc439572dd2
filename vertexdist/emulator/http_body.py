"""Reading a request body as Google's front end does: bounded, and never trusting the announced length.

- A POST (or PUT, PATCH) without `Content-Length` gets 411, as googleapis.com answers ("POST requests
  require a Content-length header"; googleapis/storage-testbench#729). A `Transfer-Encoding` body gets
  411 too: the emulator's clients always send a length, and a body it cannot frame cannot be skipped.
- A malformed `Content-Length` (not digits, several different values) or a body that ends early is 400.
- A body over `MAX_BODY_BYTES` is 413, answered before reading any of it. 10 MiB is the largest request
  payload limit Google's front ends announce ("Request payload size exceeds the limit: 10485760 bytes",
  googleworkspace/dotnet-samples#23); a valid CustomJob request is under 1.5 MiB
  (`vertexdist.spec.limits.REQUEST_BYTES`), so only garbage is refused, and each connection holds at
  most this much memory.
- JSON must be one object, standard JSON (no NaN), nested at most `MAX_JSON_DEPTH` levels: protobuf's
  default recursion limit, which the front end's JSON-to-proto parsing enforces (400 beyond it). The depth
  is counted on the raw bytes before `json.loads` runs, so it holds whatever the interpreter's recursion
  limit is (json's C parser recurses once per level: with a raised limit, a deep enough body would
  overflow the C stack and kill the process). Both the Vertex API and the storage API parse through here.
Every error that leaves unread bytes on the connection says so (`close`): the answer then closes it, so
a keep-alive connection never reads the rest of one body as the next request.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from email.message import Message
from itertools import accumulate
from typing import Any, Protocol

MAX_BODY_BYTES = 10 * 1024 * 1024
MAX_JSON_DEPTH = 100
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_DIGITS = re.compile(r"^[0-9]{1,20}$")
_READ_CHUNK = 64 * 1024
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string, escapes included
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [0] * 256
for _open, _close in (b"[]", b"{}"):
    _STEP[_open], _STEP[_close] = 1, -1


class Reader(Protocol):
    def read(self, size: int, /) -> bytes: ...


@dataclass
class BodyError(Exception):
    """The request's body cannot be taken; `close` when the connection cannot be reused after it."""

    status: int
    message: str
    close: bool = True


def read_body(method: str, headers: Message, rfile: Reader, limit: int = MAX_BODY_BYTES) -> bytes:
    """The whole body of this request (empty when it has none), read to its end and no further."""
    if headers.get_all("Transfer-Encoding"):
        raise BodyError(411, f"{method} requests require a Content-length header (no Transfer-Encoding).")
    lengths = headers.get_all("Content-Length") or []
    if not lengths:
        if method in _BODY_METHODS:
            raise BodyError(411, f"{method} requests require a Content-length header.")
        return b""
    values = {value.strip() for value in lengths}
    if len(values) != 1 or not _DIGITS.match(next(iter(values))):
        shown = ", ".join(repr(v[:40]) for v in lengths[:3])
        raise BodyError(400, f"Content-Length {shown} is not one whole number of bytes.")
    length = int(next(iter(values)))
    if length > limit:
        raise BodyError(413, f"Request payload size {length} exceeds the limit: {limit} bytes.")
    parts: list[bytes] = []
    left = length
    while left > 0:
        part = rfile.read(min(left, _READ_CHUNK))
        if not part:
            raise BodyError(400, f"the body ended after {length - left} of {length} bytes.")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _depth(value: Any) -> int:
    """How deeply `value` nests, counted without recursion (so a deep value cannot exhaust the stack)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


def nests_deeper(raw: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text `raw` opens more than `limit` arrays and objects inside each other, counted
    without parsing (brackets inside strings do not count) and without recursion."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object ({} for an empty body); ValueError saying what is wrong with it."""
    if not raw.strip():
        return {}
    if nests_deeper(raw):
        raise ValueError(f"request body nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        body = json.loads(raw, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError(f"request body nests deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:  # also UnicodeDecodeError
        raise ValueError(f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ValueError("request body must be a JSON object")
    if _depth(body) > MAX_JSON_DEPTH:
        raise ValueError(f"request body nests deeper than {MAX_JSON_DEPTH} levels")
    return body
