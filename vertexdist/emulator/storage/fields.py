"""An object's fields that the storage emulator serves back as HTTP headers: checked when written, encoded
when served, so a stored value never becomes a header of its own or a download that cannot be sent.

- `check_fields`: `contentType`, `contentDisposition`, `contentEncoding`, `cacheControl`,
  `contentLanguage`, `customTime` and `storageClass` must be strings, `metadata` a map of strings (at most
  8 KiB in all, Cloud Storage's limit for custom metadata), the holds booleans; none may hold a control
  character (C0, DEL or C1: CR and LF would start a header of their own). `None` is "remove" (patch).
- `header_value` / `header_name`: what is sent. Cloud Storage's JSON API keeps any Unicode text, but an
  HTTP header is ASCII (https://cloud.google.com/storage/docs/metadata: "avoid non-ascii characters, because
  they are not permitted in HTTP headers"): what is not printable ASCII is percent-encoded as UTF-8
  (RFC 3986), and a `Content-Disposition` filename becomes `filename*=UTF-8''...` (RFC 5987 / RFC 6266), as
  browsers read it. The JSON resource keeps the value as written.
- `media_headers`: the headers a download carries for a record; a record stored before these checks with
  a `metadata` that is not a map is served without it, never a 500.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

TEXT_FIELDS = (
    "cacheControl",
    "contentDisposition",
    "contentEncoding",
    "contentLanguage",
    "contentType",
    "customTime",
    "storageClass",
)
BOOL_FIELDS = ("temporaryHold", "eventBasedHold")
MAX_METADATA_BYTES = 8 * 1024  # https://cloud.google.com/storage/quotas: custom metadata, 8 KiB in all
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e]")
_NOT_TOKEN = re.compile(r"[^!#$%&'*+\-.^_`|~0-9A-Za-z]")  # RFC 9110 tchar
_FILENAME = re.compile(r'(?i)\bfilename\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))')
_ATTR_SAFE = "!#$&+-.^_`|~"  # RFC 5987 attr-char, besides letters and digits
HEADER_FIELDS = (
    ("contentEncoding", "Content-Encoding"),
    ("contentDisposition", "Content-Disposition"),
    ("cacheControl", "Cache-Control"),
    ("contentLanguage", "Content-Language"),
)


class FieldError(ValueError):
    """A field no object can have; the message names it and says what would be right."""


def _check_text(what: str, value: str) -> None:
    found = _CONTROL.search(value)
    if found:
        raise FieldError(
            f"{what} holds the control character {found.group()!r} at offset {found.start()}:"
            " header values must be text without CR, LF or other control characters"
        )


def check_fields(fields: Mapping[str, Any]) -> None:
    """Refuse, with FieldError, any field of `fields` that could not be served back as a header."""
    for field in TEXT_FIELDS:
        value = fields.get(field)
        if value is None:
            continue
        if not isinstance(value, str):
            raise FieldError(f"{field} must be a string, not {type(value).__name__} {value!r:.60}")
        _check_text(field, value)
    for field in BOOL_FIELDS:
        value = fields.get(field)
        if value is not None and not isinstance(value, bool):
            raise FieldError(f"{field} must be true or false, not {value!r:.60}")
    metadata = fields.get("metadata")
    if metadata is None:
        return
    if not isinstance(metadata, Mapping):
        raise FieldError(
            f"metadata must be a map of strings to strings, not {type(metadata).__name__} {metadata!r:.60}"
        )
    size = 0
    for key, value in metadata.items():
        if not isinstance(key, str) or not key:
            raise FieldError(f"metadata keys must be non-empty strings, not {key!r:.60}")
        _check_text(f"the metadata key {key[:60]!r}", key)
        if value is None:  # patch: remove the key
            continue
        if not isinstance(value, str):
            raise FieldError(
                f"metadata[{key[:60]!r}] must be a string, not {type(value).__name__} {value!r:.60}"
            )
        _check_text(f"metadata[{key[:60]!r}]", value)
        size += len(key.encode()) + len(value.encode())
    if size > MAX_METADATA_BYTES:
        raise FieldError(f"metadata is {size} bytes: custom metadata is at most {MAX_METADATA_BYTES} bytes")


def _percent(match: re.Match[str]) -> str:
    return quote(match.group(), safe="")


def header_name(key: str) -> str:
    """A metadata key as the name after `x-goog-meta-`: an HTTP token, other characters percent-encoded."""
    return _NOT_TOKEN.sub(_percent, key)


def header_value(value: str, *, disposition: bool = False) -> str:
    """`value` as printable ASCII (what is not, percent-encoded as UTF-8); with `disposition`, a non-ASCII
    `filename` parameter becomes `filename*=UTF-8''...`."""
    if disposition and _NOT_PRINTABLE_ASCII.search(value):

        def extended(match: re.Match[str]) -> str:
            name = match.group(1) if match.group(1) is not None else match.group(2).strip()
            if not _NOT_PRINTABLE_ASCII.search(name):
                return match.group()
            name = re.sub(r"\\(.)", r"\1", name) if match.group(1) is not None else name
            return "filename*=UTF-8''" + quote(name, safe=_ATTR_SAFE)

        value = _FILENAME.sub(extended, value)
    return _NOT_PRINTABLE_ASCII.sub(_percent, value)


def media_headers(record: Mapping[str, Any]) -> dict[str, str]:
    """The headers of a download that come from the object's fields (type, encoding, custom metadata...)."""
    content_type = record.get("contentType")
    headers = {"Content-Type": header_value(str(content_type or "application/octet-stream"))}
    for field, header in HEADER_FIELDS:
        value = record.get(field)
        if value:
            headers[header] = header_value(str(value), disposition=field == "contentDisposition")
    metadata = record.get("metadata")
    if isinstance(metadata, Mapping):
        for key, value in metadata.items():
            if value is not None:
                headers[f"x-goog-meta-{header_name(str(key))}"] = header_value(str(value))
    return headers
