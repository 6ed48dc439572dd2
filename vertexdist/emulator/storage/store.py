"""The emulated Cloud Storage's buckets and objects, on disk, safe across threads and restarts.

Layout under the root (one folder per emulator data folder):

    buckets/<bucket>/bucket.json           the bucket resource
    buckets/<bucket>/objects/<key>.json    an object's metadata (key: sha256 of its name)
    buckets/<bucket>/objects/<key>.<gen>   its bytes, one file per generation
    uploads/<id>.json, uploads/<id>.part   resumable upload sessions and what they received so far
    tmp/                                   files being written

An object changes in one step: its bytes go to a temporary file, which is renamed to a new generation's file,
then the metadata is replaced with a rename; only then is the older generation's file removed. A reader that
opened the older file keeps reading it whole. A crash (kill -9) at any point leaves either the old object or
the new one, never a mix: at start, files no metadata names are removed. Metadata carries no URL: links are
made for each answer from the address it was asked on (`http`), so they follow the serving emulator.

Semantics follow https://cloud.google.com/storage/docs/json_api/v1 (generations, metagenerations,
preconditions, composite objects have a crc32c and no md5Hash); object versioning is not emulated.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from vertexdist.emulator.storage.fields import FieldError, check_fields
from vertexdist.gcs_body import Hashes, StoreError
from vertexdist.gcs_uploads import UploadSessions, write_json
from vertexdist.wire.projects import project_number

READ_BYTES = 1 << 20
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")
MAX_OBJECT_NAME_BYTES = 1024
_INT64 = re.compile(r"-?[0-9]{1,19}")  # ASCII digits only: int() also takes "١٢", " 12" and "1_2"
_INT64_MAX = (1 << 63) - 1
# Fields of an object a client may set (objects.insert / patch / update / compose / rewrite).
WRITABLE = (
    "cacheControl",
    "contentDisposition",
    "contentEncoding",
    "contentLanguage",
    "contentType",
    "customTime",
    "metadata",
    "storageClass",
    "temporaryHold",
    "eventBasedHold",
)
BUCKET_WRITABLE = (
    "labels",
    "location",
    "storageClass",
    "versioning",
    "lifecycle",
    "cors",
    "iamConfiguration",
)
Record = dict[str, Any]


def _not_found(what: str) -> StoreError:
    return StoreError(404, "notFound", f"No such {what}.")


def _invalid(message: str) -> StoreError:
    return StoreError(400, "invalid", message)


def parse_int64(value: Any, what: str) -> int:
    """A generation, metageneration or precondition: an int64, as a JSON number or a decimal string."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _INT64.fullmatch(value):
        number = int(value)
    else:
        raise _invalid(f"{what}={value!r:.60} is not a number (a 64-bit integer in decimal digits)")
    if not -_INT64_MAX - 1 <= number <= _INT64_MAX:
        raise _invalid(f"{what}={value!r:.60} is out of range (a 64-bit integer)")
    return number


def checked_fields(fields: Mapping[str, Any]) -> Mapping[str, Any]:
    """`fields`, once `fields.check_fields` finds nothing that could not be served as a header."""
    try:
        check_fields(fields)
    except FieldError as exc:
        raise _invalid(str(exc)) from None
    return fields


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


def now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


@dataclass(frozen=True)
class Preconditions:
    """`ifGenerationMatch` & co.; `ifGenerationMatch=0` means "only if there is no such object"."""

    generation_match: int | None = None
    generation_not_match: int | None = None
    metageneration_match: int | None = None
    metageneration_not_match: int | None = None

    @classmethod
    def from_query(cls, query: Mapping[str, str], prefix: str = "if") -> Preconditions:
        def number(key: str) -> int | None:
            value = query.get(f"{prefix}{key}")
            if value is None or value == "":
                return None
            return parse_int64(value, f"{prefix}{key}")

        return cls(
            number("GenerationMatch"),
            number("GenerationNotMatch"),
            number("MetagenerationMatch"),
            number("MetagenerationNotMatch"),
        )

    def check(self, current: Record | None) -> None:
        generation = int(current["generation"]) if current else 0
        metageneration = int(current["metageneration"]) if current else None
        failed = (
            (self.generation_match is not None and self.generation_match != generation)
            or (self.generation_not_match is not None and self.generation_not_match == generation)
            or (self.metageneration_match is not None and self.metageneration_match != metageneration)
            or (self.metageneration_not_match is not None and self.metageneration_not_match == metageneration)
        )
        if failed:
            raise StoreError(
                412, "conditionNotMet", "At least one of the pre-conditions you specified did not hold."
            )

    @property
    def any(self) -> bool:
        return any(v is not None for v in vars(self).values())


def _key(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def check_object_name(name: str) -> None:
    if not name:
        raise StoreError(400, "required", "Required object name.")
    if len(name.encode()) > MAX_OBJECT_NAME_BYTES or "\r" in name or "\n" in name or name in (".", ".."):
        raise _invalid(f"The object name {name[:80]!r} is not valid (at most 1024 bytes, no CR or LF).")


def _page_start(token: str) -> str:
    """The name a `nextPageToken` of `list` continues after; 400 for a token `list` never gave (Cloud
    Storage answers "Invalid Value" to those)."""
    try:
        return base64.b64decode(token.encode("ascii"), altchars=b"-_", validate=True).decode("utf-8")
    except (UnicodeError, binascii.Error):
        raise _invalid(f"Invalid Value: pageToken {token[:60]!r} is not a token this listing gave") from None


class ObjectStore:
    """Buckets and objects under `root`; every method is safe to call from any thread."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._buckets_dir = self.root / "buckets"
        self._uploads_dir = self.root / "uploads"
        self.tmp_dir = self.root / "tmp"
        for folder in (self._buckets_dir, self._uploads_dir, self.tmp_dir):
            folder.mkdir(parents=True, exist_ok=True)
        self._uploads = UploadSessions(self._uploads_dir)
        self._lock = threading.RLock()
        self._last_generation = 0
        self._buckets: dict[str, Record] = {}
        self._objects: dict[str, dict[str, Record]] = {}
        self._load()

    # --- start-up ---------------------------------------------------------------------------------
    def _load(self) -> None:
        shutil.rmtree(self.tmp_dir, ignore_errors=True)
        self.tmp_dir.mkdir()
        for folder in sorted(self._buckets_dir.iterdir()):
            try:
                bucket = json.loads((folder / "bucket.json").read_text())
            except (OSError, ValueError):
                continue  # a bucket whose creation never finished
            self._buckets[bucket["name"]] = bucket
            objects: dict[str, Record] = {}
            folder_objects = folder / "objects"
            folder_objects.mkdir(exist_ok=True)
            for meta in folder_objects.glob("*.json"):
                try:
                    record = json.loads(meta.read_text())
                except (OSError, ValueError):
                    continue
                objects[record["name"]] = record
                self._last_generation = max(self._last_generation, int(record["generation"]))
            self._objects[bucket["name"]] = objects
            live = {f"{_key(n)}.{r['generation']}" for n, r in objects.items()}
            for path in folder_objects.iterdir():
                if path.suffix != ".json" and path.name not in live:
                    path.unlink(missing_ok=True)  # a generation replaced, or written by a crashed upload
        self._uploads.forget_finished()

    def _next_generation(self) -> int:
        self._last_generation = max(self._last_generation + 1, time.time_ns() // 1000)
        return self._last_generation

    def temp_file(self) -> Path:
        return self.tmp_dir / secrets.token_hex(12)

    @contextlib.contextmanager
    def temporary(self) -> Iterator[Path]:
        """A new file's path in tmp/, removed on the way out unless `commit` moved it into the store."""
        temp = self.temp_file()
        try:
            yield temp
        finally:
            temp.unlink(missing_ok=True)

    # --- buckets ----------------------------------------------------------------------------------
    def _bucket_dir(self, bucket: str) -> Path:
        return self._buckets_dir / bucket

    def create_bucket(self, body: Mapping[str, Any], project: str = "") -> Record:
        """A new bucket, owned by `project` (its number in `projectNumber`, as Cloud Storage gives it: the
        SDK checks a staging bucket's owner by it); "0" when no project is named."""
        name = body.get("name") or ""
        if not isinstance(name, str):
            raise _invalid(f"A bucket's name must be a string, not {type(name).__name__} {name!r:.60}")
        if not BUCKET_NAME.match(name) or ".." in name:
            raise _invalid(
                f"Invalid bucket name: {name!r} (3-222 characters: lowercase letters, digits, -, _ and .;"
                " starting and ending with a letter or digit)"
            )
        with self._lock:
            if name in self._buckets:
                raise StoreError(
                    409,
                    "conflict",
                    "Your previous request to create the named bucket succeeded and you already own it.",
                )
            stamp = now_rfc3339()
            bucket: Record = {
                "kind": "storage#bucket",
                "id": name,
                "name": name,
                "projectNumber": project_number(project) if project else "0",
                "metageneration": "1",
                "location": "US",
                "storageClass": "STANDARD",
                "locationType": "multi-region",
                "timeCreated": stamp,
                "updated": stamp,
                "etag": "CAE=",
            }
            bucket.update({k: body[k] for k in BUCKET_WRITABLE if k in body})
            folder = self._bucket_dir(name)
            (folder / "objects").mkdir(parents=True, exist_ok=True)
            write_json(folder / "bucket.json", bucket)
            self._buckets[name] = bucket
            self._objects[name] = {}
            return dict(bucket)

    def bucket(self, name: str) -> Record:
        with self._lock:
            found = self._buckets.get(name)
            if found is None:
                raise _not_found("bucket")
            return dict(found)

    def buckets(self) -> list[Record]:
        with self._lock:
            return [dict(self._buckets[n]) for n in sorted(self._buckets)]

    def patch_bucket(self, name: str, changes: Mapping[str, Any]) -> Record:
        with self._lock:
            bucket = self.bucket(name)
            bucket.update({k: changes[k] for k in BUCKET_WRITABLE if k in changes})
            bucket["metageneration"] = str(int(bucket["metageneration"]) + 1)
            bucket["updated"] = now_rfc3339()
            write_json(self._bucket_dir(name) / "bucket.json", bucket)
            self._buckets[name] = bucket
            return dict(bucket)

    def delete_bucket(self, name: str) -> None:
        with self._lock:
            self.bucket(name)
            if self._objects[name]:
                raise StoreError(409, "conflict", "The bucket you tried to delete is not empty.")
            (self._bucket_dir(name) / "bucket.json").unlink()
            shutil.rmtree(self._bucket_dir(name), ignore_errors=True)
            del self._buckets[name], self._objects[name]

    # --- objects ----------------------------------------------------------------------------------
    def _data_path(self, record: Record) -> Path:
        return (
            self._bucket_dir(record["bucket"]) / "objects" / f"{_key(record['name'])}.{record['generation']}"
        )

    def _current(self, bucket: str, name: str) -> Record | None:
        if bucket not in self._buckets:
            raise _not_found("bucket")
        return self._objects[bucket].get(name)

    def get(
        self, bucket: str, name: str, generation: int | None = None, when: Preconditions | None = None
    ) -> Record:
        with self._lock:
            current = self._current(bucket, name)
            if current is None or (generation is not None and int(current["generation"]) != generation):
                raise _not_found("object")
            (when or Preconditions()).check(current)
            return dict(current)

    def open(self, record: Record) -> IO[bytes]:
        """The bytes of that generation, readable whole even if the object changes meanwhile."""
        with self._lock:
            try:
                return open(self._data_path(record), "rb")
            except FileNotFoundError:
                raise _not_found("object") from None

    def commit(
        self,
        bucket: str,
        name: str,
        data: Path,
        fields: Mapping[str, Any],
        *,
        when: Preconditions | None = None,
        hashes: Hashes | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> Record:
        """Make the file `data` (moved, not copied) the new generation of `bucket/name`; `data` is removed
        if that fails."""
        try:
            return self._commit(bucket, name, data, fields, when=when, hashes=hashes, extra=extra)
        except BaseException:
            data.unlink(missing_ok=True)  # a rejected upload's bytes never stay in tmp/
            raise

    def _commit(
        self,
        bucket: str,
        name: str,
        data: Path,
        fields: Mapping[str, Any],
        *,
        when: Preconditions | None,
        hashes: Hashes | None,
        extra: Mapping[str, Any] | None,
    ) -> Record:
        check_object_name(name)
        checked_fields(fields)
        hashes = hashes or Hashes.of_file(data)
        for key, got in (("md5Hash", hashes.md5), ("crc32c", hashes.crc32c)):
            claimed = fields.get(key)
            if claimed and got and claimed != got:
                what = "MD5" if key == "md5Hash" else "CRC32C"
                raise _invalid(
                    f'Provided {what} hash "{claimed}" doesn\'t match calculated {what} hash "{got}".'
                )
        with self._lock:
            current = self._current(bucket, name)
            (when or Preconditions()).check(current)
            stamp = now_rfc3339()
            generation = self._next_generation()
            record: Record = {
                "name": name,
                "bucket": bucket,
                "generation": str(generation),
                "metageneration": "1",
                "contentType": "application/octet-stream",
                "storageClass": "STANDARD",
                "size": str(hashes.size),
                "crc32c": hashes.crc32c,
                "etag": _b64(generation.to_bytes(8, "big")),
                "timeCreated": stamp,
                "updated": stamp,
                "timeStorageClassUpdated": stamp,
            }
            if hashes.md5 is not None:
                record["md5Hash"] = hashes.md5
            record.update({k: v for k, v in fields.items() if k in WRITABLE and v is not None})
            record.update(extra or {})
            os.replace(data, self._data_path(record))
            meta = self._bucket_dir(bucket) / "objects" / f"{_key(name)}.json"
            write_json(meta, record)
            self._objects[bucket][name] = record
            if current is not None:
                self._data_path(current).unlink(missing_ok=True)
            return dict(record)

    def put_file(
        self, source: Path, bucket: str, name: str, fields: Mapping[str, Any] | None = None
    ) -> Record:
        """Upload a local file (copied) as `bucket/name`, in-process."""
        with self.temporary() as temp:
            shutil.copyfile(source, temp)
            return self.commit(bucket, name, temp, fields or {})

    def delete(self, bucket: str, name: str, when: Preconditions | None = None) -> None:
        with self._lock:
            current = self._current(bucket, name)
            if current is None:
                raise _not_found("object")
            (when or Preconditions()).check(current)
            (self._bucket_dir(bucket) / "objects" / f"{_key(name)}.json").unlink()
            del self._objects[bucket][name]
            self._data_path(current).unlink(missing_ok=True)

    def patch(
        self,
        bucket: str,
        name: str,
        changes: Mapping[str, Any],
        when: Preconditions | None = None,
        *,
        replace: bool = False,
    ) -> Record:
        """objects.patch (a null removes a field, a null metadata key removes that key); objects.update with
        `replace` (fields not given are cleared)."""
        checked_fields(changes)
        with self._lock:
            record = self.get(bucket, name, when=when)
            if replace:
                for field in WRITABLE:
                    record.pop(field, None)
                record["contentType"] = "application/octet-stream"
            for field in WRITABLE:
                if field not in changes:
                    continue
                value = changes[field]
                if value is None:
                    record.pop(field, None)
                elif field == "metadata" and isinstance(value, Mapping) and not replace:
                    old = record.get("metadata")
                    merged = {**(old if isinstance(old, Mapping) else {}), **value}
                    record["metadata"] = {k: v for k, v in merged.items() if v is not None}
                else:
                    record[field] = value
            record["metageneration"] = str(int(record["metageneration"]) + 1)
            record["updated"] = now_rfc3339()
            write_json(self._bucket_dir(bucket) / "objects" / f"{_key(name)}.json", record)
            self._objects[bucket][name] = record
            return dict(record)

    def copy(
        self,
        source: Record,
        bucket: str,
        name: str,
        fields: Mapping[str, Any],
        when: Preconditions | None = None,
    ) -> Record:
        """A new object with `source`'s bytes; its metadata is `fields` where given, else the source's."""
        kept = {k: source[k] for k in WRITABLE if k in source}
        checked_fields({**kept, **fields})
        check_object_name(name)
        with self.temporary() as temp:
            with self.open(source) as handle, open(temp, "wb") as out:
                shutil.copyfileobj(handle, out, READ_BYTES)
            hashes = Hashes.of_file(temp, with_md5="md5Hash" in source)
            extra = {"componentCount": source["componentCount"]} if "componentCount" in source else None
            return self.commit(bucket, name, temp, {**kept, **fields}, when=when, hashes=hashes, extra=extra)

    def compose(
        self,
        bucket: str,
        name: str,
        sources: list[Record],
        fields: Mapping[str, Any],
        when: Preconditions | None = None,
    ) -> Record:
        if not 1 <= len(sources) <= 32:
            raise _invalid("A compose request takes 1 to 32 source objects.")
        checked_fields(fields)
        check_object_name(name)
        with self.temporary() as temp:
            with open(temp, "wb") as out:
                for source in sources:
                    with self.open(source) as handle:
                        shutil.copyfileobj(handle, out, READ_BYTES)
            hashes = Hashes.of_file(temp, with_md5=False)
            count = sum(int(s.get("componentCount", 1)) for s in sources)
            return self.commit(
                bucket, name, temp, fields, when=when, hashes=hashes, extra={"componentCount": count}
            )

    def list(
        self,
        bucket: str,
        *,
        prefix: str = "",
        delimiter: str = "",
        start_offset: str = "",
        end_offset: str = "",
        match: Callable[[str], bool] | None = None,
        include_trailing_delimiter: bool = False,
        page_token: str = "",
        max_results: int = 1000,
    ) -> tuple[list[Record], list[str], str]:
        """(objects, prefixes, next page token) as objects.list answers them, in name order."""
        with self._lock:
            self.bucket(bucket)
            names = sorted(self._objects[bucket])
            records = self._objects[bucket]
            after = _page_start(page_token) if page_token else ""
            items: list[Record] = []
            prefixes: list[str] = []
            seen: set[str] = set()
            last = ""
            for name in names:
                if not name.startswith(prefix) or (after and name <= after):
                    continue
                if (start_offset and name < start_offset) or (end_offset and name >= end_offset):
                    continue
                if match is not None and not match(name):
                    continue
                rest = name[len(prefix) :]
                if delimiter and delimiter in rest:
                    folder = prefix + rest[: rest.index(delimiter) + len(delimiter)]
                    if folder in seen:
                        continue
                    if len(items) + len(prefixes) >= max_results:
                        break
                    seen.add(folder)
                    prefixes.append(folder)
                    # Everything under this folder is summed up by it: the next page starts after it.
                    last = folder + "\U0010ffff"
                    if include_trailing_delimiter and folder in records:
                        items.append(dict(records[folder]))
                    continue
                if len(items) + len(prefixes) >= max_results:
                    break
                items.append(dict(records[name]))
                last = name
            else:
                return items, prefixes, ""
            token = base64.urlsafe_b64encode(last.encode()).decode()
            return items, prefixes, token

    # --- resumable uploads (the sessions: `vertexdist.gcs_uploads`, shared with a local run's server) -----
    def start_upload(
        self, bucket: str, name: str, fields: Mapping[str, Any], when: Preconditions, size: int | None
    ) -> str:
        check_object_name(name)
        checked_fields(fields)
        with self._lock:
            (when).check(self._current(bucket, name))
        return self._uploads.start(
            {
                "bucket": bucket,
                "name": name,
                "fields": {k: v for k, v in fields.items() if k in WRITABLE or k in ("md5Hash", "crc32c")},
                "when": vars(when),
                "size": size,
            }
        )

    def session(self, upload_id: str) -> tuple[dict[str, Any], int]:
        """The session and how many bytes it has received."""
        return self._uploads.get(upload_id)

    def append(self, upload_id: str, start: int, chunks: Iterable[bytes]) -> int:
        """Add bytes from offset `start` (bytes already received are skipped); the new count received."""
        return self._uploads.append(upload_id, start, chunks)

    def finish_upload(self, upload_id: str) -> Record:
        session, _received = self._uploads.get(upload_id)
        if session.get("done"):
            return dict(session["done"])
        temp = self.temp_file()
        self._uploads.take(upload_id, temp)
        try:
            record = self.commit(
                session["bucket"],
                session["name"],
                temp,
                session["fields"],
                when=Preconditions(**session["when"]),
            )
        except StoreError:
            self._uploads.cancel(upload_id)
            raise
        self._uploads.finish(upload_id, record)
        return record

    def cancel_upload(self, upload_id: str) -> None:
        self._uploads.cancel(upload_id)

    def names(self, bucket: str) -> Iterator[str]:
        with self._lock:
            return iter(sorted(self._objects.get(bucket, {})))
