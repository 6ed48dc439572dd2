"""Multipart uploads as each client frames them (pure: `split_multipart` over bytes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertexdist.emulator.storage.store import StoreError
from vertexdist.gcs_body import split_multipart

META = b'{"name": "x/small.txt"}'
MEDIA = b"hi\nthere\r\n--not-a-delimiter\n"


def _body(boundary: str, newline: bytes) -> bytes:
    dash = b"--" + boundary.encode()
    return newline.join(
        [
            dash,
            b"Content-Type: application/json",
            b"",
            META,
            dash,
            b"Content-Type: text/plain",
            b"",
            MEDIA,
            dash + b"--",
            b"",
        ]
    )


@pytest.mark.parametrize(
    ("content_type", "boundary", "newline"),
    [
        # RFC 2046: a bare or double-quoted boundary, CRLF (google-cloud-storage)
        ("multipart/related; boundary=abc123", "abc123", b"\r\n"),
        ('multipart/related; boundary="===============123=="', "===============123==", b"\r\n"),
        # the gcloud CLI: a single-quoted boundary, parts separated by LF alone
        ("multipart/related; boundary='===============123=='", "===============123==", b"\n"),
    ],
)
def test_each_clients_framing_gives_the_same_metadata_and_media(
    tmp_path: Path, content_type: str, boundary: str, newline: bytes
) -> None:
    body = _body(boundary, newline)
    dest = tmp_path / "media"
    # one byte at a time too: the delimiters may arrive split across reads
    for pieces in ([body], [body[i : i + 1] for i in range(len(body))]):
        meta, media_type, _hashes = split_multipart(content_type, iter(pieces), dest)
        assert meta == META
        assert media_type == "text/plain"
        assert dest.read_bytes() == MEDIA


def test_a_body_without_its_closing_delimiter_is_refused(tmp_path: Path) -> None:
    body = _body("b1", b"\n").replace(b"--b1--", b"")
    with pytest.raises(StoreError, match="closing delimiter"):
        split_multipart("multipart/related; boundary='b1'", iter([body]), tmp_path / "media")
