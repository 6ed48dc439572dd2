"""Resumable upload sessions, shared by the emulator's Cloud Storage and a local run's
(`vertexdist.gcs_uploads`): a chunk resent after a lost answer adds nothing twice, a gap is refused, a
finished session's answer stays until a restart forgets it."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertexdist.gcs_body import StoreError, parse_content_range
from vertexdist.gcs_uploads import UploadSessions


def test_chunks_are_placed_by_where_they_start(tmp_path: Path) -> None:
    sessions = UploadSessions(tmp_path / "sessions")
    upload_id = sessions.start({"bucket": "b", "name": "x"})
    assert sessions.append(upload_id, 0, [b"ab", b"c"]) == 3
    assert sessions.append(upload_id, 1, [b"bcde"]) == 5  # resent from byte 1: "bc" is not added twice
    with pytest.raises(StoreError, match="cannot start at byte 9") as refused:
        sessions.append(upload_id, 9, [b"z"])
    assert refused.value.code == 400
    sessions.take(upload_id, tmp_path / "object")
    assert (tmp_path / "object").read_bytes() == b"abcde"
    sessions.finish(upload_id, {"size": 5})
    session, _received = sessions.get(upload_id)
    assert session == {"bucket": "b", "name": "x", "done": {"size": 5}}
    sessions.forget_finished()
    with pytest.raises(StoreError) as gone:
        sessions.get(upload_id)
    assert gone.value.code == 404


def test_an_id_not_given_is_no_session_and_no_path(tmp_path: Path) -> None:
    sessions = UploadSessions(tmp_path / "sessions")
    for upload_id in ("../../etc/passwd", "0" * 31, "f" * 32):
        with pytest.raises(StoreError) as missing:
            sessions.get(upload_id)
        assert missing.value.code == 404


@pytest.mark.parametrize(
    ("header", "found"),
    [
        ("bytes 0-2/*", (0, None)),
        ("bytes 3-5/6", (3, 6)),
        ("bytes */6", (None, 6)),
        ("bytes */*", (None, None)),
    ],
)
def test_content_range(header: str, found: tuple[int | None, int | None]) -> None:
    assert parse_content_range(header) == found


@pytest.mark.parametrize("header", ["bytes 0-2", "bytes ²-3/4", "items 0-1/2", "bytes -1-2/3"])
def test_a_content_range_not_bytes_start_end_total_is_400(header: str) -> None:
    with pytest.raises(StoreError) as refused:
        parse_content_range(header)
    assert refused.value.code == 400
