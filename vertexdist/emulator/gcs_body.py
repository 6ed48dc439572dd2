"""Request bodies of the emulated Cloud Storage, read as streams: an upload of any size is written to disk as
it arrives, never held in memory (media and resumable bodies as they are, multipart bodies parsed on the way).

Framing is `Content-Length` or `Transfer-Encoding: chunked` (Cloud Storage takes both for uploads). A body
that ends early is an error that closes the connection.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from email.message import Message
from pathlib import Path
from typing import Protocol

from vertexdist.emulator.gcs_store import Hashes, StoreError

READ_BYTES = 1 << 20
MAX_HEAD_BYTES = 8 << 20  # a multipart upload's metadata part (JSON) and the headers around it


class Reader(Protocol):
    def read(self, size: int, /) -> bytes: ...

    def readline(self, size: int = -1, /) -> bytes: ...


class BodyEnded(Exception):
    """The client stopped sending before the body's end: the connection cannot be used again."""


def body_chunks(headers: Message, rfile: Reader) -> Iterator[bytes]:
    """The request body in pieces of at most READ_BYTES (nothing for a request without one)."""
    if (headers.get("Transfer-Encoding") or "").lower() == "chunked":
        while True:
            line = rfile.readline(1024).split(b";", 1)[0].strip()
            try:
                size = int(line, 16)
            except ValueError:
                raise BodyEnded("a chunk's size line is not hexadecimal") from None
            if size == 0:
                while rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            yield from _exactly(rfile, size)
            rfile.readline(8)
    length = headers.get("Content-Length")
    if length is None:
        return
    if not length.strip().isdigit():
        raise StoreError(400, "invalid", f"Content-Length {length!r} is not a number of bytes.")
    yield from _exactly(rfile, int(length))


def _exactly(rfile: Reader, length: int) -> Iterator[bytes]:
    left = length
    while left > 0:
        piece = rfile.read(min(left, READ_BYTES))
        if not piece:
            raise BodyEnded(f"the body ended after {length - left} of {length} bytes")
        left -= len(piece)
        yield piece


def read_all(chunks: Iterator[bytes], limit: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > limit:
            for _ in chunks:
                pass
            raise StoreError(413, "uploadTooLarge", f"The request body is over {limit} bytes.")
        parts.append(chunk)
    return b"".join(parts)


def write_stream(chunks: Iterator[bytes], dest: Path, hashes: Hashes | None = None) -> Hashes:
    """Write the pieces to `dest`, hashing them on the way."""
    hashes = hashes or Hashes()
    with open(dest, "wb") as out:
        for chunk in chunks:
            hashes.update(chunk)
            out.write(chunk)
    return hashes


def _boundary(content_type: str) -> bytes:
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    if not match:
        raise StoreError(400, "invalid", "A multipart upload needs a boundary in its Content-Type.")
    return match.group(1).encode()


def _part_headers(block: bytes) -> dict[str, str]:
    found = {}
    for line in block.split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if sep:
            found[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return found


def _locate(head: bytes, boundary: bytes) -> tuple[int, int, int] | None:
    """Where the metadata starts and ends and the media starts, once `head` reaches that far."""
    first = b"--" + boundary + b"\r\n"
    delimiter = b"\r\n--" + boundary + b"\r\n"
    start = head.find(first)
    meta_at = head.find(b"\r\n\r\n", start + len(first)) if start >= 0 else -1
    meta_end = head.find(delimiter, meta_at + 4) if meta_at >= 0 else -1
    media_at = head.find(b"\r\n\r\n", meta_end + len(delimiter)) if meta_end >= 0 else -1
    return (meta_at + 4, meta_end, media_at + 4) if media_at >= 0 else None


def split_multipart(content_type: str, chunks: Iterator[bytes], dest: Path) -> tuple[bytes, str, Hashes]:
    """A `multipart/related` upload: (its metadata part, the media part's content type, hashes of the media
    part, which is written to `dest`). The media part is streamed: only its last bytes are held back, to
    take the closing delimiter off."""
    boundary = _boundary(content_type)
    delimiter = b"\r\n--" + boundary
    head = b""
    found = None
    for chunk in chunks:
        head += chunk
        found = _locate(head, boundary)
        if found is not None or len(head) > MAX_HEAD_BYTES:
            break
    else:
        found = _locate(head, boundary)
    if found is None:
        for _ in chunks:
            pass
        raise StoreError(400, "invalid", "The multipart upload's body is not metadata followed by media.")
    meta_at, meta_end, media_at = found
    metadata = head[meta_at:meta_end]
    media_headers = _part_headers(head[meta_end + len(delimiter) + 2 : media_at - 4])
    closing = delimiter + b"--"
    hashes = Hashes()
    held = head[media_at:]
    with open(dest, "wb") as out:
        for chunk in chunks:
            held += chunk
            keep = len(closing) + 4  # the closing delimiter and a CRLF around it
            if len(held) > keep:
                out.write(held[:-keep])
                hashes.update(held[:-keep])
                held = held[-keep:]
        end = held.rfind(closing)
        if end < 0:
            raise StoreError(400, "invalid", "The multipart upload's body has no closing delimiter.")
        out.write(held[:end])
        hashes.update(held[:end])
    return metadata, media_headers.get("content-type", "application/octet-stream"), hashes
