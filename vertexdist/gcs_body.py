"""Request bodies of the Cloud Storage JSON API as both servers of it read them, the emulator's
(`emulator/storage/http.py`) and a local run's over its gs:// folder (`local/gcs_server.py`): one parser, so
every client's framing (google-cloud-storage's, gcsfs's, pyarrow's, the gcloud CLI's) works with both.

Bodies are read as streams: an upload of any size is written to disk as it arrives, never held in memory
(media and resumable bodies as they are, multipart bodies parsed on the way).

Framing is `Content-Length` or `Transfer-Encoding: chunked` (Cloud Storage takes both for uploads). A body
that ends early is an error that closes the connection. A `Content-Length` must be ASCII digits (one value,
however often it is repeated), else 400. `RequestBody` counts what is left, so an error answer reads the
rest of a small body (the connection stays usable) and closes the connection instead of reading a big one.
A resumable upload's chunk says where it goes in `Content-Range` (`parse_content_range`).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Protocol

import google_crc32c  # installed with google-cloud-storage

READ_BYTES = 1 << 20
MAX_HEAD_BYTES = 8 << 20  # a multipart upload's metadata part (JSON) and the headers around it
DRAIN_BYTES = 128 << 20  # the most an error answer reads of a body's rest (a second on loopback)
_LENGTH = re.compile(r"[0-9]{1,20}")


@dataclass
class StoreError(Exception):
    """An answer other than success: its HTTP status, Cloud Storage's reason, and the message."""

    code: int
    reason: str
    message: str


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


class Hashes:
    """md5 and crc32c of bytes as they pass, in Cloud Storage's base64 form."""

    def __init__(self, with_md5: bool = True) -> None:
        self._md5 = hashlib.md5(usedforsecurity=False) if with_md5 else None
        self._crc = google_crc32c.Checksum()
        self.size = 0

    def update(self, data: bytes) -> None:
        if self._md5 is not None:
            self._md5.update(data)
        self._crc.update(data)
        self.size += len(data)

    @property
    def md5(self) -> str | None:
        return _b64(self._md5.digest()) if self._md5 is not None else None

    @property
    def crc32c(self) -> str:
        return _b64(self._crc.digest())

    @classmethod
    def of_file(cls, path: Path, with_md5: bool = True) -> Hashes:
        hashes = cls(with_md5)
        with open(path, "rb") as handle:
            while block := handle.read(READ_BYTES):
                hashes.update(block)
        return hashes


class Reader(Protocol):
    def read(self, size: int, /) -> bytes: ...

    def readline(self, size: int = -1, /) -> bytes: ...


class BodyEnded(Exception):
    """The client stopped sending before the body's end: the connection cannot be used again."""


def declared_length(headers: Message) -> int | None:
    """The body's `Content-Length` (None without one); 400 unless it is one number in ASCII digits."""
    values = {value.strip() for value in headers.get_all("Content-Length") or []}
    if not values:
        return None
    if len(values) > 1 or not _LENGTH.fullmatch(next(iter(values))):
        shown = ", ".join(repr(v[:40]) for v in sorted(values)[:3])
        raise StoreError(400, "invalid", f"Content-Length {shown} is not one number of bytes.")
    return int(next(iter(values)))


def is_chunked(headers: Message) -> bool:
    return (headers.get("Transfer-Encoding") or "").lower() == "chunked"


class RequestBody:
    """The request body as an iterator of pieces (`body_chunks`), knowing how much of it is left."""

    def __init__(self, headers: Message, rfile: Reader) -> None:
        self.chunked = is_chunked(headers)
        self.error: StoreError | None = None
        self.length: int | None = None
        if not self.chunked:
            try:
                self.length = declared_length(headers)
            except StoreError as exc:
                self.error = exc
        self.read = 0
        self.refused = False
        self._pieces = self._read(headers, rfile)

    def _read(self, headers: Message, rfile: Reader) -> Iterator[bytes]:
        if self.error is not None:
            raise self.error
        try:
            for piece in _pieces(headers, rfile):
                self.read += len(piece)
                yield piece
        except BodyEnded:
            self.refused = True  # the connection is out of step: never reused
            raise

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        return next(self._pieces)

    @property
    def left(self) -> int | None:
        """Bytes not read yet; None when unknown (chunked)."""
        return None if self.length is None else self.length - self.read

    def refuse(self) -> None:
        """This body is refused unread: `drain` then reads none of it (the connection is closed)."""
        self.refused = True

    def drain(self, limit: int = DRAIN_BYTES) -> bool:
        """Read the rest, if it is at most `limit` bytes; False when the connection cannot be reused."""
        if self.error is not None or self.refused:
            return False
        left = self.left
        if left is not None and left > limit:
            return False
        start = self.read
        try:
            for _ in self:
                if self.read - start > limit:
                    return False
        except (BodyEnded, StoreError):
            return False
        return True


def body_chunks(headers: Message, rfile: Reader) -> RequestBody:
    """The request body in pieces of at most READ_BYTES (nothing for a request without one)."""
    return RequestBody(headers, rfile)


def _pieces(headers: Message, rfile: Reader) -> Iterator[bytes]:
    if is_chunked(headers):
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
    length = declared_length(headers)
    if length is None:
        return
    yield from _exactly(rfile, length)


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
        if total > limit:  # the rest is left to the caller's drain, which closes rather than read it all
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
    """The boundary of a `multipart/related` type: bare, double-quoted (RFC 2046) or single-quoted, as the
    gcloud CLI writes it (`boundary='===...=='`)."""
    match = re.search(r"""boundary=(?:"([^"]+)"|'([^']+)'|([^";\s]+))""", content_type)
    if not match:
        raise StoreError(400, "invalid", "A multipart upload needs a boundary in its Content-Type.")
    return next(group for group in match.groups() if group).encode()


def _part_headers(block: bytes) -> dict[str, str]:
    found = {}
    for line in block.split(b"\n"):
        name, sep, value = line.rstrip(b"\r").partition(b":")
        if sep:
            found[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return found


def _layout(boundary: bytes) -> re.Pattern[bytes]:
    """The body up to the media's first byte: delimiter, headers, blank line, metadata, delimiter, headers,
    blank line. Lines end in CRLF (RFC 2046) or LF alone (the gcloud CLI)."""
    dash = b"--" + re.escape(boundary)
    headers = rb"(?:[^\r\n]+\r?\n)*\r?\n"
    return re.compile(
        dash
        + rb"\r?\n"
        + headers
        + rb"(?P<meta>.*?)\r?\n"
        + dash
        + rb"\r?\n(?P<media_headers>"
        + headers
        + rb")",
        re.DOTALL,
    )


def _locate(head: bytes, layout: re.Pattern[bytes]) -> tuple[int, int, int, int] | None:
    """Where the metadata starts and ends, and the media's headers and bytes start, once `head` reaches
    that far."""
    match = layout.search(head)
    if match is None:
        return None
    return match.start("meta"), match.end("meta"), match.start("media_headers"), match.end()


def split_multipart(content_type: str, chunks: Iterator[bytes], dest: Path) -> tuple[bytes, str, Hashes]:
    """A `multipart/related` upload: (its metadata part, the media part's content type, hashes of the media
    part, which is written to `dest`). The media part is streamed: only its last bytes are held back, to
    take the closing delimiter off."""
    boundary = _boundary(content_type)
    layout = _layout(boundary)
    head = b""
    found = None
    for chunk in chunks:
        head += chunk
        found = _locate(head, layout)
        if found is not None or len(head) > MAX_HEAD_BYTES:
            break
    else:
        found = _locate(head, layout)
    if found is None:
        raise StoreError(400, "invalid", "The multipart upload's body is not metadata followed by media.")
    meta_at, meta_end, headers_at, media_at = found
    metadata = head[meta_at:meta_end]
    media_headers = _part_headers(head[headers_at:media_at])
    closing = b"--" + boundary + b"--"
    hashes = Hashes()
    held = head[media_at:]
    keep = len(closing) + 4  # the closing delimiter and the line ends around it
    with open(dest, "wb") as out:
        for chunk in chunks:
            held += chunk
            if len(held) > keep:
                out.write(held[:-keep])
                hashes.update(held[:-keep])
                held = held[-keep:]
        end = held.rfind(closing)
        line_end = 2 if held[:end].endswith(b"\r\n") else 1 if held[:end].endswith(b"\n") else 0
        if end < 0 or not line_end:
            raise StoreError(400, "invalid", "The multipart upload's body has no closing delimiter.")
        out.write(held[: end - line_end])
        hashes.update(held[: end - line_end])
    return metadata, media_headers.get("content-type", "application/octet-stream"), hashes


_CONTENT_RANGE = re.compile(r"bytes (?:([0-9]{1,20})-([0-9]{1,20})|\*)/([0-9]{1,20}|\*)")


def parse_content_range(header: str) -> tuple[int | None, int | None]:
    """A resumable upload chunk's `Content-Range` as (where its bytes start, the upload's total size):
    `bytes START-END/TOTAL`, `bytes START-END/*` (more to come), `bytes */TOTAL` (no bytes: the last chunk
    ended it, or the client asks how much arrived). None where the header says none. 400 for anything else.
    https://cloud.google.com/storage/docs/performing-resumable-uploads"""
    match = _CONTENT_RANGE.fullmatch(header.strip())
    if not match:
        raise StoreError(400, "invalid", f"Content-Range {header[:80]!r} is not bytes START-END/TOTAL")
    start, _end, total = match.groups()
    return (int(start) if start is not None else None), (int(total) if total != "*" else None)
