"""The emulator's Cloud Storage through google-cloud-storage and plain HTTP: empty objects by every kind of
upload, a 50 MB object by resumable chunks and the largest multipart upload, what survives a restart on
another port (links included), a crash's leftovers, and answers while another upload is under way."""

from __future__ import annotations

import hashlib
import http.client
import os
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vertexdist.emulator.storage.server import StorageEmulator

pytestmark = pytest.mark.integration
BUCKET = "vd-store"
BIG = 50 << 20


@pytest.fixture
def storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StorageEmulator]:
    emulator = StorageEmulator(data_dir=tmp_path / "storage")
    emulator.start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.endpoint)
    try:
        yield emulator
    finally:
        emulator.stop()


def client(endpoint: str) -> Any:
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage as gcs

    return gcs.Client(
        project="p", credentials=AnonymousCredentials(), client_options={"api_endpoint": endpoint}
    )


def sizes(bucket: Any) -> dict[str, int]:
    return {blob.name: blob.size for blob in bucket.list_blobs()}


def test_an_empty_object_by_every_kind_of_upload(storage: StorageEmulator, tmp_path: Path) -> None:
    bucket = client(storage.endpoint).create_bucket(BUCKET)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    # A media upload with an empty body: what gcp-storage-emulator answered with a dropped connection.
    request = urllib.request.Request(
        f"{storage.endpoint}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=media",
        data=b"",
        method="POST",
        headers={"Content-Type": "application/octet-stream"},  # urllib's own default is a form's type
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200
    bucket.blob("multipart").upload_from_string(b"")
    resumable = bucket.blob("resumable", chunk_size=256 * 1024)
    with open(empty, "rb") as handle:
        resumable.upload_from_file(handle, size=0)
    assert storage.upload(empty, f"gs://{BUCKET}/in-process")
    assert sizes(bucket) == {"in-process": 0, "media": 0, "multipart": 0, "resumable": 0}
    for name in ("media", "multipart", "resumable", "in-process"):
        assert bucket.blob(name).download_as_bytes() == b""
        assert bucket.get_blob(name).md5_hash == "1B2M2Y8AsgTpgAmY7PhCfg=="  # md5 of nothing


def test_a_50_mb_object_by_resumable_chunks_and_the_largest_multipart_upload(
    storage: StorageEmulator, tmp_path: Path
) -> None:
    bucket = client(storage.endpoint).create_bucket(BUCKET)
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(BIG))
    chunked = bucket.blob("chunked.bin", chunk_size=8 << 20)  # 7 PUTs of a resumable session
    chunked.upload_from_filename(str(big))
    whole = bucket.blob("whole.bin")  # one resumable PUT (the client's default chunk is 100 MiB)
    whole.upload_from_filename(str(big))
    multipart = tmp_path / "eight.bin"
    multipart.write_bytes(big.read_bytes()[: 8 << 20])  # 8 MiB: the largest the client sends as multipart
    bucket.blob("multipart.bin").upload_from_filename(str(multipart))

    digest = hashlib.md5(big.read_bytes()).digest()
    for name in ("chunked.bin", "whole.bin"):
        blob = bucket.get_blob(name)
        assert blob.size == BIG
        got = tmp_path / f"got-{name}"
        blob.download_to_filename(str(got))  # the client checks the md5 the emulator sends
        assert hashlib.md5(got.read_bytes()).digest() == digest
    assert bucket.blob("multipart.bin").download_as_bytes() == multipart.read_bytes()
    tail = bucket.blob("whole.bin").download_as_bytes(start=BIG - 10)
    assert tail == big.read_bytes()[-10:]


def test_objects_and_their_links_survive_a_restart_on_another_port(tmp_path: Path) -> None:
    first = StorageEmulator(data_dir=tmp_path / "storage")
    first.start()
    try:
        bucket = client(first.endpoint).create_bucket(BUCKET)
        bucket.blob("a/model.bin").upload_from_string(b"weights" * 1000)
        bucket.blob("a/empty").upload_from_string(b"")
        old_port = first.port
    finally:
        first.stop()
    with socket.socket() as holder:  # the old port stays taken: the next emulator cannot get it back
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", old_port))
        second = StorageEmulator(data_dir=tmp_path / "storage")
        second.start()
    try:
        assert second.port != old_port
        bucket = client(second.endpoint).bucket(BUCKET)
        assert sizes(bucket) == {"a/empty": 0, "a/model.bin": 7000}
        blob = bucket.get_blob("a/model.bin")
        assert blob.media_link.startswith(f"{second.endpoint}/download/")
        got = tmp_path / "got"
        blob.download_to_filename(str(got), timeout=5)  # through mediaLink, as `outputs --download` does
        assert got.read_bytes() == b"weights" * 1000
    finally:
        second.stop()


def test_a_restart_after_a_crash_mid_write_keeps_the_last_whole_object(tmp_path: Path) -> None:
    first = StorageEmulator(data_dir=tmp_path / "storage")
    first.start()
    client(first.endpoint).create_bucket(BUCKET).blob("model.bin").upload_from_string(b"v1")
    first.stop()
    # What kill -9 in the middle of writing generation 2 leaves: its bytes, and a temporary file.
    objects = next((tmp_path / "storage" / "buckets" / BUCKET / "objects").glob("*.json")).parent
    (objects / f"{next(objects.glob('*.json')).stem}.99999999999999999").write_bytes(b"v2, half")
    (tmp_path / "storage" / "tmp" / "upload-in-flight").write_bytes(b"v2")
    second = StorageEmulator(data_dir=tmp_path / "storage")
    second.start()
    try:
        assert client(second.endpoint).bucket(BUCKET).blob("model.bin").download_as_bytes() == b"v1"
        assert len(list(objects.iterdir())) == 2  # the metadata and generation 1's bytes
        assert not list((tmp_path / "storage" / "tmp").iterdir())
    finally:
        second.stop()


def test_requests_are_answered_while_an_upload_is_half_sent(storage: StorageEmulator) -> None:
    client(storage.endpoint).create_bucket(BUCKET)
    slow = http.client.HTTPConnection("127.0.0.1", storage.port, timeout=10)
    slow.putrequest("POST", f"/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=slow")
    slow.putheader("Content-Length", "10")
    slow.putheader("Content-Type", "application/octet-stream")
    slow.endheaders()
    slow.send(b"12345")  # half of it
    with urllib.request.urlopen(f"{storage.endpoint}/storage/v1/b/{BUCKET}/o", timeout=5) as answer:
        assert answer.status == 200
    slow.send(b"67890")
    assert slow.getresponse().status == 200
    assert client(storage.endpoint).bucket(BUCKET).blob("slow").download_as_bytes() == b"1234567890"


def test_listing_pages_folders_and_preconditions(storage: StorageEmulator) -> None:
    from google.api_core import exceptions

    bucket = client(storage.endpoint).create_bucket(BUCKET)
    for name in ("a/1", "a/2", "b/1", "c", "d"):
        bucket.blob(name).upload_from_string(name)
    pages = bucket.list_blobs(delimiter="/", max_results=2)
    names = [blob.name for blob in pages]
    assert names == ["c", "d"] and pages.prefixes == {"a/", "b/"}
    assert [b.name for b in bucket.list_blobs(prefix="a/", page_size=1)] == ["a/1", "a/2"]
    assert [b.name for b in bucket.list_blobs(match_glob="**/1")] == ["a/1", "b/1"]
    with pytest.raises(exceptions.PreconditionFailed):
        bucket.blob("c").upload_from_string("again", if_generation_match=0)
    assert bucket.blob("c").download_as_bytes() == b"c"
    with pytest.raises(exceptions.Conflict):
        bucket.delete()


def test_outputs_download_after_the_emulator_restarts_on_other_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any, pool: Any
) -> None:
    from vertexdist.emulator import Emulator

    code = (
        "import os, pathlib\n"
        "out = pathlib.Path(os.environ['VERTEXDIST_GCS_ROOT'], os.environ['AIP_MODEL_DIR'][5:])\n"
        "out.mkdir(parents=True)\n"
        "(out / 'model.bin').write_bytes(b'm' * 5000)\n"
        "(out / '.validate_storage_marker').write_bytes(b'')\n"
    )
    spec = {
        "displayName": "writer",
        "jobSpec": {
            "workerPoolSpecs": [pool(code)],
            "baseOutputDirectory": {"outputUriPrefix": "gs://vd-out/run"},
        },
    }
    with Emulator(data_dir=tmp_path / "emulator", hold_get_s=5.0) as first:
        job = first.service.create_custom_job("projects/p/locations/us-central1", json_spec(spec))
        assert first.store.wait_until(job["name"], lambda j: j["state"].endswith("SUCCEEDED"), 60)
        old_port = first.storage.port
    with Emulator(data_dir=tmp_path / "emulator") as second:
        assert second.storage.port != old_port
        monkeypatch.setenv("VERTEX_API_ENDPOINT", second.vertex_endpoint)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", second.storage_endpoint)
        code_, _out, err = cli("outputs", job["name"], "--download", str(tmp_path / "got"))
        assert code_ == 0, err
        assert (tmp_path / "got" / "model" / "model.bin").read_bytes() == b"m" * 5000
        assert (tmp_path / "got" / "model" / ".validate_storage_marker").read_bytes() == b""
        assert sorted(p.name for p in (tmp_path / "got" / "model").iterdir()) == [
            ".validate_storage_marker",
            "model.bin",
        ]


def json_spec(body: dict[str, Any]) -> dict[str, Any]:
    """`command_pool`'s snake_case pool as the REST API's camelCase."""
    pool = body["jobSpec"]["workerPoolSpecs"][0]
    body["jobSpec"]["workerPoolSpecs"] = [
        {
            "machineSpec": {"machineType": pool["machine_spec"]["machine_type"]},
            "replicaCount": pool["replica_count"],
            "containerSpec": {
                "imageUri": pool["container_spec"]["image_uri"],
                "command": pool["container_spec"]["command"],
            },
        }
    ]
    return body
