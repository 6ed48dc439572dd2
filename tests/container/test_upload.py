"""The context upload and the build-log reader, through google-cloud-storage against the GCS emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vertexdist.container.cloud import LogFollower, join_object, read_log_chunk, upload_context
from vertexdist.container.context import collect_context, write_context_tar

pytestmark = pytest.mark.integration


def test_context_is_uploaded_once_and_arrives_byte_for_byte(
    storage_client: Any, tmp_path: Path, write_files: Any
) -> None:
    root = write_files(tmp_path / "ctx", {"Dockerfile": "FROM scratch\n", "app/task.py": "print(1)\n"})
    context = collect_context(root, root / "Dockerfile")
    tar_path = tmp_path / "context.tar.gz"
    with open(tar_path, "wb") as out:
        digest = write_context_tar(context, out)
    object_name = join_object("staging", "vertexdist", "build-contexts", f"{digest}.tar.gz")

    assert upload_context(storage_client, tar_path, "vd-staging", object_name) is True
    # Same content, same object name: the second run sends nothing.
    assert upload_context(storage_client, tar_path, "vd-staging", object_name) is False
    blob = storage_client.bucket("vd-staging").get_blob(object_name)
    assert blob.download_as_bytes() == tar_path.read_bytes()
    names = [b.name for b in storage_client.list_blobs("vd-staging", prefix="staging/vertexdist/")]
    assert names == [object_name]


def test_log_follower_prints_complete_lines_as_the_log_grows(storage_client: Any) -> None:
    blob = storage_client.bucket("vd-staging").blob("logs/log-123.txt")
    seen: list[str] = []
    follower = LogFollower(storage_client, "vd-staging", "logs/log-123.txt", seen.append)
    follower.poll()  # no log object yet
    assert seen == []
    blob.upload_from_string(b"Step #0: one\nStep #1: tw")
    follower.poll()
    assert seen == ["Step #0: one"]
    blob.upload_from_string(b"Step #0: one\nStep #1: two\nDONE")
    follower.poll()
    assert seen == ["Step #0: one", "Step #1: two"]
    follower.poll(final=True)
    assert seen == ["Step #0: one", "Step #1: two", "DONE"]
    assert read_log_chunk(storage_client, "vd-staging", "logs/log-123.txt", 10_000) == b""


def test_join_object() -> None:
    assert join_object("", "vertexdist", "x") == "vertexdist/x"
