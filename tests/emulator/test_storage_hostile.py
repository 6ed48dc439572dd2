"""The emulated Cloud Storage against hostile input: links that ignore the request's Host, objects that are
never live pages, header fields without control characters, non-Latin-1 metadata that still downloads,
400 (never 500) for malformed numbers, tokens and bodies, lengths refused before they are read, no
temporary file left by a rejected upload, and output folders that are symlinks publishing nothing.

Raw HTTP against an emulator's storage of this module's own; the pure pieces as unit tests."""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from vertexdist.emulator import Emulator
from vertexdist.emulator.http_body import nests_deeper, parse_json_object
from vertexdist.emulator.storage.fields import (
    FieldError,
    check_fields,
    header_name,
    header_value,
    media_headers,
)
from vertexdist.emulator.storage.mirror import StorageMirror
from vertexdist.emulator.storage.output_sync import PublishError, publish_outputs
from vertexdist.emulator.storage.server import StorageEmulator

BUCKET = "vd-hostile"
REPO = Path(__file__).resolve().parents[2]


# --- raw HTTP ---------------------------------------------------------------------------------------------
def call(
    emulator: Emulator,
    method: str,
    path: str,
    body: bytes | dict[str, Any] | list[Any] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, http.client.HTTPMessage, bytes]:
    where = urlsplit(emulator.storage_endpoint)
    connection = http.client.HTTPConnection(where.hostname or "", where.port, timeout=10)
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    sent = {"Content-Type": "application/json", **(headers or {})}
    try:
        connection.request(method, path, data, sent)
        answer = connection.getresponse()
        return answer.status, answer.headers, answer.read()
    finally:
        connection.close()


def error_of(status: int, raw: bytes) -> dict[str, Any]:
    """Cloud Storage's error shape: {"error": {"code", "message", "errors": [{"reason", ...}]}}."""
    error = json.loads(raw)["error"]
    assert error["code"] == status and error["message"]
    assert error["errors"][0]["reason"] and error["errors"][0]["domain"] == "global"
    return error


def upload(
    emulator: Emulator, name: str, data: bytes = b"data", content_type: str = "application/octet-stream"
) -> Any:
    status, _headers, raw = call(
        emulator,
        "POST",
        f"/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name={quote(name, safe='')}",
        data,
        {"Content-Type": content_type},
    )
    assert status == 200, raw
    return json.loads(raw)


def object_path(name: str) -> str:
    return f"/storage/v1/b/{BUCKET}/o/{quote(name, safe='')}"


def multipart(metadata: bytes, media: bytes = b"media") -> tuple[bytes, dict[str, str]]:
    body = (
        b"--XX\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n" + metadata + b"\r\n"
        b"--XX\r\nContent-Type: text/plain\r\n\r\n" + media + b"\r\n--XX--\r\n"
    )
    return body, {"Content-Type": 'multipart/related; boundary="XX"'}


@pytest.fixture(scope="module")
def storage_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    """An emulator of this module's own, with its bucket.

    Not the session emulator: a job another test left running there uploads its logs and outputs through the
    same storage/tmp folder these tests watch, and its temporary file is not theirs.
    """
    emulator = Emulator(data_dir=tmp_path_factory.mktemp("hostile-storage"))
    emulator.start()
    try:
        status, _headers, raw = call(emulator, "POST", "/storage/v1/b?project=p", {"name": BUCKET})
        assert status == 200, raw
        yield emulator
    finally:
        emulator.stop()


def leftovers(emulator: Emulator) -> list[str]:
    """What stays in storage/tmp once the server has had a moment to finish with a request."""
    tmp = emulator.storage.store.tmp_dir
    deadline = time.monotonic() + 30  # a bound for a loaded machine; an empty folder returns at once
    while any(tmp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return sorted(p.name for p in tmp.iterdir())


# --- links ------------------------------------------------------------------------------------------------
def test_links_name_the_address_served_never_the_host_header(storage_api: Emulator) -> None:
    # A foreign Host is refused outright (test_http_guard); one of the loopback names the guard lets through
    # must still not become the links' address.
    own = storage_api.storage_endpoint
    evil = {"Host": f"localhost:{urlsplit(own).port}"}
    upload(storage_api, "links.txt")
    status, _headers, raw = call(storage_api, "GET", object_path("links.txt"), headers=evil)
    assert status == 200
    record = json.loads(raw)
    assert record["selfLink"].startswith(f"{own}/storage/v1/b/{BUCKET}/o/")
    assert record["mediaLink"].startswith(f"{own}/download/storage/v1/b/{BUCKET}/o/")
    status, _headers, raw = call(storage_api, "GET", f"/storage/v1/b/{BUCKET}", headers=evil)
    assert json.loads(raw)["selfLink"] == f"{own}/storage/v1/b/{BUCKET}"
    status, headers, _raw = call(
        storage_api,
        "POST",
        f"/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&name=links2.txt",
        {},
        evil,
    )
    assert status == 200
    assert headers["Location"].startswith(f"{own}/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&")


# --- objects are never live pages ---------------------------------------------------------------------------
def test_media_is_served_sandboxed_and_never_sniffed(storage_api: Emulator) -> None:
    upload(storage_api, "page.html", b"<script>fetch('/storage/v1/b')</script>", "text/html")
    for path in (
        f"{object_path('page.html')}?alt=media",
        f"/download/storage/v1/b/{BUCKET}/o/page.html?alt=media",
        f"/{BUCKET}/page.html",
    ):
        status, headers, _raw = call(storage_api, "GET", path)
        assert status == 200
        assert headers["Content-Security-Policy"] == "sandbox"
        assert headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("contentType", "text/html\r\nSet-Cookie: a=b"),
        ("contentDisposition", "inline\nX-Injected: 1"),
        ("contentEncoding", "gzip\x1b"),
        ("cacheControl", "no-cache\x00"),
        ("contentLanguage", "en\x7f"),
        ("metadata", {"key": "value\r\nX-Injected: 1"}),
        ("metadata", {"key\n": "value"}),
        ("metadata", {"key": "\x85"}),
    ],
)
def test_control_characters_in_header_fields_are_refused_when_written(
    storage_api: Emulator, field: str, value: Any
) -> None:
    name = "control.txt"
    upload(storage_api, name)
    writes: list[tuple[str, str, bytes | dict[str, Any], dict[str, str]]] = [
        ("PATCH", object_path(name), {field: value}, {}),
        ("PUT", object_path(name), {field: value}, {}),
        (
            "POST",
            f"{object_path(name)}/copyTo/b/{BUCKET}/o/copied.txt",
            {field: value},
            {},
        ),
        (
            "POST",
            f"{object_path('composed.txt')}/compose",
            {"sourceObjects": [{"name": name}], "destination": {field: value}},
            {},
        ),
        (
            "POST",
            f"/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&name=resumed.txt",
            {field: value},
            {},
        ),
        (
            "POST",
            f"/upload/storage/v1/b/{BUCKET}/o?uploadType=multipart&name=multi.txt",
            *multipart(json.dumps({field: value}).encode()),
        ),
    ]
    for method, path, body, headers in writes:
        status, _headers, raw = call(storage_api, method, path, body, headers)
        assert status == 400, (method, path, raw)
        assert error_of(400, raw)["errors"][0]["reason"] == "invalid"
    status, _headers, _raw = call(storage_api, "GET", f"{object_path(name)}?alt=media")
    assert status == 200
    assert leftovers(storage_api) == []


def test_a_control_character_in_an_upload_header_is_refused_before_the_body_is_stored(
    storage_api: Emulator,
) -> None:
    for path, headers in (
        (f"/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=m.txt", {"Content-Type": "text/plain\x01"}),
        (
            f"/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&name=r.txt",
            {"X-Upload-Content-Type": "text/\x02plain"},
        ),
        (f"/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=m.txt&contentEncoding=gz%0D%0Aip", {}),
    ):
        status, _headers, raw = call(storage_api, "POST", path, b"{}", headers)
        assert status == 400, raw
        error_of(400, raw)
    assert leftovers(storage_api) == []


def test_non_latin1_metadata_is_encoded_and_the_object_still_downloads(storage_api: Emulator) -> None:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    name = "unicode.txt"
    upload(storage_api, name, b"hello")
    changes = {
        "contentDisposition": 'attachment; filename="日本語.txt"',
        "contentLanguage": "日本",
        "metadata": {"名前": "値 ✓", "plain": "é"},
    }
    status, _headers, raw = call(storage_api, "PATCH", object_path(name), changes)
    assert status == 200, raw
    status, headers, raw = call(storage_api, "GET", f"{object_path(name)}?alt=media")
    assert (status, raw) == (200, b"hello")
    assert headers["Content-Disposition"] == "attachment; filename*=UTF-8''%E6%97%A5%E6%9C%AC%E8%AA%9E.txt"
    assert headers["Content-Language"] == "%E6%97%A5%E6%9C%AC"
    assert headers["x-goog-meta-%E5%90%8D%E5%89%8D"] == "%E5%80%A4 %E2%9C%93"
    assert headers["x-goog-meta-plain"] == "%C3%A9"
    client = storage.Client(
        project="p",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": storage_api.storage_endpoint},
    )
    blob = client.bucket(BUCKET).get_blob(name)
    assert blob.metadata == {"名前": "値 ✓", "plain": "é"}  # the JSON API keeps the values as they were
    assert blob.download_as_bytes() == b"hello"


# --- 400, never 500 ----------------------------------------------------------------------------------------
def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"a": "b"}
    for _ in range(levels):
        value = {"a": value}
    return value


NOT_UTF8_TOKEN = base64.urlsafe_b64encode(b"\xff\xfe").decode()
HOSTILE: list[tuple[str, str, str, Any, dict[str, str]]] = [
    ("page token not UTF-8", "GET", f"/storage/v1/b/{BUCKET}/o?pageToken={NOT_UTF8_TOKEN}", None, {}),
    ("page token %FF", "GET", f"/storage/v1/b/{BUCKET}/o?pageToken=%FF%FE", None, {}),
    ("page token not base64", "GET", f"/storage/v1/b/{BUCKET}/o?pageToken=!!!!", None, {}),
    ("generation letters", "GET", f"{object_path('n.txt')}?generation=abc", None, {}),
    ("generation superscript", "GET", f"{object_path('n.txt')}?generation=%C2%B2", None, {}),
    ("ifGenerationMatch", "GET", f"{object_path('n.txt')}?ifGenerationMatch=abc", None, {}),
    ("ifGenerationMatch Arabic", "GET", f"{object_path('n.txt')}?ifGenerationMatch=%D9%A1", None, {}),
    ("ifGenerationNotMatch", "DELETE", f"{object_path('n.txt')}?ifGenerationNotMatch=1e3", None, {}),
    ("ifMetagenerationMatch", "PATCH", f"{object_path('n.txt')}?ifMetagenerationMatch=x", {}, {}),
    ("generation over int64", "GET", f"{object_path('n.txt')}?generation={'9' * 30}", None, {}),
    (
        "sourceGeneration",
        "POST",
        f"{object_path('n.txt')}/copyTo/b/{BUCKET}/o/n2.txt?sourceGeneration=%C2%B2",
        {},
        {},
    ),
    ("Range superscript", "GET", f"{object_path('n.txt')}?alt=media", None, {"Range": "bytes=\xb2-"}),
    ("JSON nested 100,000 deep", "POST", "/storage/v1/b", b"[" * 100_000 + b"]" * 100_000, {}),
    ("JSON nested 200 deep", "PATCH", object_path("n.txt"), {"metadata": _deep(200)}, {}),
    ("metadata a list", "PATCH", object_path("n.txt"), {"metadata": ["a", "b"]}, {}),
    ("metadata a string", "PUT", object_path("n.txt"), {"metadata": "a=b"}, {}),
    ("metadata value a number", "PATCH", object_path("n.txt"), {"metadata": {"a": 1}}, {}),
    ("metadata value a map", "PATCH", object_path("n.txt"), {"metadata": {"a": {"b": "c"}}}, {}),
    ("contentType a number", "PATCH", object_path("n.txt"), {"contentType": 5}, {}),
    ("bucket named by a number", "POST", "/storage/v1/b", {"name": 12345}, {}),
    ("bucket named by a list", "POST", "/storage/v1/b", {"name": ["abc"]}, {}),
    (
        "compose generation",
        "POST",
        f"{object_path('c.txt')}/compose",
        {"sourceObjects": [{"name": "n.txt", "generation": "x"}]},
        {},
    ),
    (
        "compose precondition",
        "POST",
        f"{object_path('c.txt')}/compose",
        {"sourceObjects": [{"name": "n.txt", "objectPreconditions": {"ifGenerationMatch": [1]}}]},
        {},
    ),
    (
        "compose source named by a number",
        "POST",
        f"{object_path('c.txt')}/compose",
        {"sourceObjects": [{"name": 5}]},
        {},
    ),
    (
        "multipart metadata a list",
        "POST",
        f"/upload/storage/v1/b/{BUCKET}/o?uploadType=multipart",
        *multipart(b'["name"]'),
    ),
    (
        "multipart name a number",
        "POST",
        f"/upload/storage/v1/b/{BUCKET}/o?uploadType=multipart",
        *multipart(b'{"name": 12345}'),
    ),
    (
        "resumable name a map",
        "POST",
        f"/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable",
        {"name": {"a": "b"}},
        {},
    ),
    (
        "upload length superscript",
        "POST",
        f"/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&name=r.txt",
        {},
        {"X-Upload-Content-Length": "\xb2"},
    ),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "headers"),
    [pytest.param(*case[1:], id=case[0]) for case in HOSTILE],
)
def test_hostile_requests_are_400_never_500(
    storage_api: Emulator, method: str, path: str, body: Any, headers: dict[str, str]
) -> None:
    upload(storage_api, "n.txt", b"0123456789")
    status, _headers, raw = call(storage_api, method, path, body, headers)
    assert status == 400, raw
    error_of(400, raw)
    status, _headers, raw = call(storage_api, "GET", f"{object_path('n.txt')}?alt=media")
    assert (status, raw) == (200, b"0123456789")  # nothing stored that breaks the next download
    status, _headers, raw = call(storage_api, "GET", f"/storage/v1/b/{BUCKET}/o")
    assert status == 200
    assert "12345" not in [item["name"] for item in json.loads(raw).get("items", [])]


def test_a_content_length_that_is_not_ascii_digits_is_400(storage_api: Emulator) -> None:
    status, _headers, raw = call(storage_api, "POST", "/storage/v1/b", None, {"Content-Length": "\xb2"})
    assert status == 400, raw


def _raw_head(emulator: Emulator, head: str) -> tuple[bytes, float]:
    """Send a request's head and no body; what came back before the server closed, and how long it took."""
    where = urlsplit(emulator.storage_endpoint)
    started = time.monotonic()
    with socket.create_connection((where.hostname or "", where.port or 0), timeout=5) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode())
        got = b""
        try:
            while chunk := sock.recv(65536):
                got += chunk
        except TimeoutError:
            pass
    return got, time.monotonic() - started


@pytest.mark.parametrize(
    ("request_line", "length", "status"),
    [
        ("POST /storage/v1/b", 20 << 20, b"413"),  # a JSON body over 10 MiB
        (f"PATCH {object_path('n.txt')}", 1 << 40, b"413"),
        (f"POST /upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=big", 6 << 40, b"400"),  # over 5 TiB
        ("POST /upload/storage/v1/b/no-such-bucket/o?uploadType=media&name=x", 1 << 30, b"404"),
    ],
)
def test_a_refused_body_is_answered_at_once_and_never_read(
    storage_api: Emulator, request_line: str, length: int, status: bytes
) -> None:
    upload(storage_api, "n.txt")
    where = urlsplit(storage_api.storage_endpoint).netloc
    got, took = _raw_head(
        storage_api,
        f"{request_line} HTTP/1.1\nHost: {where}\nContent-Type: application/json\n"
        f"Content-Length: {length}\n\n",
    )
    assert got.startswith(b"HTTP/1.1 " + status), got[:200]
    assert b"Connection: close" in got  # the unread body is never taken for the next request
    assert took < 4  # answered, and the connection closed, without waiting for the body


# --- no temporary file left behind --------------------------------------------------------------------------
def test_rejected_uploads_leave_nothing_in_tmp(storage_api: Emulator) -> None:
    upload(storage_api, "exists.txt")
    long_name = "x" * 2000
    rejected: list[tuple[str, bytes, dict[str, str]]] = [
        (f"/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=", b"body", {}),  # no name
        (f"/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name={long_name}", b"body", {}),
        (f"/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=exists.txt&ifGenerationMatch=0", b"b", {}),
        (f"/upload/storage/v1/b/{BUCKET}/o?uploadType=multipart&name={long_name}", *multipart(b"{}")),
        (f"/upload/storage/v1/b/{BUCKET}/o?uploadType=multipart", *multipart(b'{"md5Hash": "AAAA"}')),
        (f"/upload/storage/v1/b/{BUCKET}/o?uploadType=multipart", *multipart(b"not json")),
        (f"{object_path('exists.txt')}/copyTo/b/{BUCKET}/o/{long_name}", b"{}", {}),
        (f"{object_path('exists.txt')}/rewriteTo/b/{BUCKET}/o/{long_name}", b"{}", {}),
    ]
    for path, body, headers in rejected:
        status, _headers, raw = call(storage_api, "POST", path, body, headers)
        assert 400 <= status < 500, (path[:100], raw)
        assert leftovers(storage_api) == [], path[:100]
    # A resumable upload whose precondition fails when it finishes.
    status, headers, _raw = call(
        storage_api,
        "POST",
        f"/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable&name=later.txt&ifGenerationMatch=0",
        {},
    )
    assert status == 200
    upload(storage_api, "later.txt")  # the object now exists: the session's precondition no longer holds
    session = urlsplit(headers["Location"])
    status, _headers, raw = call(
        storage_api, "PUT", f"{session.path}?{session.query}", b"abc", {"Content-Range": "bytes 0-2/3"}
    )
    assert status == 412, raw
    assert leftovers(storage_api) == []
    upload_id = headers["X-GUploader-UploadID"]
    assert list((storage_api.storage.store.root / "uploads").glob(f"{upload_id}.*")) == []


@pytest.mark.parametrize("kind", ["media", "multipart"])
def test_an_upload_whose_body_ends_early_leaves_nothing_in_tmp(storage_api: Emulator, kind: str) -> None:
    where = urlsplit(storage_api.storage_endpoint)
    body, headers = multipart(b"{}", b"x" * 1000) if kind == "multipart" else (b"x" * 1000, {})
    head = f"POST /upload/storage/v1/b/{BUCKET}/o?uploadType={kind}&name=cut HTTP/1.1\r\n"
    head += f"Host: {where.netloc}\r\nContent-Length: {len(body) + 5000}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    with socket.create_connection((where.hostname or "", where.port or 0), timeout=5) as sock:
        sock.sendall(head.encode() + body[:-10])
    assert leftovers(storage_api) == []


# --- output folders that are symlinks ----------------------------------------------------------------------
def _secret_folder(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    (outside / "model").mkdir(parents=True)
    (outside / "model" / "secret.txt").write_text("not the job's")
    return outside


@pytest.mark.parametrize("link", ["out", "bkt", "out/model"])
def test_an_output_folder_that_is_a_symlink_publishes_nothing(tmp_path: Path, link: str) -> None:
    storage = StorageEmulator(data_dir=tmp_path / "storage")
    root = tmp_path / "gcs"
    outside = _secret_folder(tmp_path)
    job = root / "bkt" / "out"
    if link == "bkt":
        root.mkdir()
        (tmp_path / "bucket-elsewhere").mkdir()
        (tmp_path / "bucket-elsewhere" / "out").symlink_to(outside, target_is_directory=True)
        (root / "bkt").symlink_to(tmp_path / "bucket-elsewhere", target_is_directory=True)
    elif link == "out":
        job.parent.mkdir(parents=True)
        job.symlink_to(outside, target_is_directory=True)
    else:
        job.mkdir(parents=True)
        (job / "own.txt").write_text("the job's")
        (job / "model").symlink_to(outside / "model", target_is_directory=True)
    spec = {"baseOutputDirectory": {"outputUriPrefix": "gs://bkt/out"}}
    if link == "out/model":
        assert publish_outputs(storage, root, spec) == ["out/own.txt"]
    else:
        with pytest.raises(PublishError, match="symbolic link"):
            publish_outputs(storage, root, spec)
    storage.ensure_bucket("bkt")
    names = list(storage.store.names("bkt"))
    assert not [n for n in names if "secret" in n], names


def test_the_mirror_neither_publishes_nor_writes_through_a_symlink(
    storage_api: Emulator, tmp_path: Path
) -> None:
    storage = storage_api.storage
    outside = _secret_folder(tmp_path)
    # The mirror folder itself replaced by a link to a folder with a bucket-like subfolder.
    linked = tmp_path / "linked-gcs"
    linked.symlink_to(outside, target_is_directory=True)
    mirror = StorageMirror(storage, linked, tmp_path / "state.json")
    assert mirror.push() == 0
    assert "model" not in [b["name"] for b in storage.store.buckets()]
    # A folder in the mirror replaced by a link out of it: pulling an object below it writes nothing there.
    folder = tmp_path / "gcs"
    (folder / BUCKET).mkdir(parents=True)
    (folder / BUCKET / "sub").symlink_to(outside, target_is_directory=True)
    upload(storage_api, "sub/pulled.txt", b"pulled")
    StorageMirror(storage, folder, tmp_path / "state2.json").pull()
    assert not (outside / "pulled.txt").exists()


# --- pure pieces ------------------------------------------------------------------------------------------
def test_header_values_are_ascii_and_keep_their_meaning() -> None:
    assert header_value("text/plain; charset=utf-8") == "text/plain; charset=utf-8"
    assert header_value("é ✓") == "%C3%A9 %E2%9C%93"
    assert header_value("a\r\nb") == "a%0D%0Ab"  # a record stored before the checks is never a new header
    assert header_name("名") == "%E5%90%8D"
    assert header_name("a b:c") == "a%20b%3Ac"
    disposition = 'inline; filename="résumé.pdf"; size=3'
    assert header_value(disposition, disposition=True) == (
        "inline; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf; size=3"
    )
    headers = media_headers({"metadata": ["not", "a", "map"], "contentType": "text/plain"})
    assert headers == {"Content-Type": "text/plain"}
    assert media_headers({"metadata": {"n": 5}})["x-goog-meta-n"] == "5"


@pytest.mark.parametrize(
    "fields",
    [
        {"contentType": "a\nb"},
        {"contentType": 5},
        {"metadata": []},
        {"metadata": {"a": None, "b": 2}},
        {"metadata": {"": "empty key"}},
        {"metadata": {"k": "v" * 9000}},
        {"temporaryHold": "yes"},
        {"customTime": "\x00"},
    ],
)
def test_fields_that_cannot_be_headers_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(FieldError):
        check_fields(fields)


def test_fields_that_can_be_headers_pass() -> None:
    check_fields(
        {"contentType": "text/plain; charset=é", "metadata": {"名": "値", "gone": None}, "md5Hash": "x"}
    )
    check_fields({"metadata": None, "contentType": None})


def test_deep_json_is_refused_whatever_the_recursion_limit() -> None:
    """A depth check that does not lean on json's recursion guard: with a raised limit, 2 million levels
    overflow the C stack (a crash, not an error) unless the depth is counted first."""
    code = (
        "import sys; sys.setrecursionlimit(10**7)\n"
        "from vertexdist.emulator.http_body import parse_json_object\n"
        "try:\n    parse_json_object(b'[' * 2_000_000 + b']' * 2_000_000)\n"
        "except ValueError as exc:\n    print('refused:', exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and "refused: request body nests deeper than 100" in done.stdout, done


def test_brackets_inside_strings_are_not_nesting() -> None:
    assert not nests_deeper(b'{"a": "' + b"[" * 500 + b'\\" {{{"}')
    assert parse_json_object(b'{"a": "' + b"[" * 500 + b'", "b": [[1], [2], ' + b"[3], " * 200 + b"[4]]}")
    assert nests_deeper(b'{"a": "]]]", "b": ' + b"[" * 101 + b"]" * 101 + b"}")
