"""A local run's gs:// folder read and written as Cloud Storage objects: `gs://BUCKET/NAME` is the file
`<root>/BUCKET/NAME`, the very file a replica sees at `/gcs/BUCKET/NAME` and `vertexdist outputs` lists.

What the JSON API server of a local run (`gcs_server`) needs of the folder, and nothing about HTTP:

- A name maps to a file only when every segment is a plain name (no empty, `.` or `..` segment, no NUL), and
  nothing on the way is a symbolic link (an object `B/etc/x` never reaches /etc). Else `ObjectError` 400.
- A folder is not an object, as in Cloud Storage, with one exception: an empty folder is listed as the
  0-byte "folder marker" `NAME/` that clients (pyarrow's `create_dir`, gcsfs's `mkdir`) write to make one;
  writing `NAME/` makes the folder, deleting it removes the folder if it is empty.
- Writes land whole: the bytes go to a temporary file first, which is renamed over the object's file.
- A generation is the file's mtime in nanoseconds. An object's md5 and crc32c are worked out when it is
  written or its metadata asked for (google-cloud-storage checks an upload's), and kept while the file's
  size and mtime stay; listings carry none (clients check none there).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from vertexdist.gcs_body import Hashes

BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")
MAX_NAME_BYTES = 1024
DEFAULT_PAGE = 1000


class ObjectError(Exception):
    """An answer in Cloud Storage's terms: HTTP status, its reason, and a message naming the gs:// path."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message


def gs_uri(bucket: str, name: str = "") -> str:
    return f"gs://{bucket}/{name}"


def check_bucket(bucket: str) -> None:
    if not BUCKET_NAME.match(bucket) or ".." in bucket:
        raise ObjectError(400, "invalid", f"gs://{bucket}: not a valid bucket name")


def check_name(bucket: str, name: str) -> list[str]:
    """The segments of object `name`, once it is one a folder can hold (a trailing `/` is a folder marker)."""
    if not name or len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES or "\x00" in name:
        raise ObjectError(400, "invalid", f"{gs_uri(bucket, name)}: not a valid object name")
    parts = name[:-1].split("/") if name.endswith("/") else name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise ObjectError(
            400,
            "invalid",
            f"{gs_uri(bucket, name)}: a local run keeps objects as files, so a name with an empty, `.` or"
            " `..` segment cannot be one",
        )
    return parts


def rfc3339(seconds: float) -> str:
    return (
        datetime.fromtimestamp(seconds, tz=timezone.utc)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


@dataclass(frozen=True)
class Entry:
    """One object: its name and the file (or, for a folder marker, the empty folder) behind it."""

    bucket: str
    name: str
    size: int
    mtime_ns: int

    def resource(self, base: str) -> dict[str, Any]:
        """The object as the JSON API's `storage#object` (links from `base`, the server's own address)."""
        from urllib.parse import quote

        quoted = quote(self.name, safe="")
        link = f"{base}/storage/v1/b/{self.bucket}/o/{quoted}"
        updated = rfc3339(self.mtime_ns / 1e9)
        # A folder is a marker as pyarrow writes one (its own metadata says so; pyarrow checks it).
        extra = {"metadata": {"arrow/gcsfs": "directory"}} if self.name.endswith("/") else {}
        return {
            **extra,
            "kind": "storage#object",
            "id": f"{self.bucket}/{self.name}/{self.mtime_ns}",
            "selfLink": link,
            "mediaLink": f"{base}/download/storage/v1/b/{self.bucket}/o/{quoted}?alt=media",
            "name": self.name,
            "bucket": self.bucket,
            "generation": str(self.mtime_ns),
            "metageneration": "1",
            "contentType": "application/octet-stream",
            "storageClass": "STANDARD",
            "size": str(self.size),
            "etag": f"{self.mtime_ns:x}",
            "timeCreated": updated,
            "updated": updated,
            "timeStorageClassUpdated": updated,
        }


class ObjectFolder:
    """The objects of every bucket under `root` (a bucket is a folder `root/BUCKET`, made on first write)."""

    def __init__(self, root: Path, scratch: Path) -> None:
        self.root = Path(root)
        self.scratch = Path(scratch)
        self._hashes: dict[tuple[str, int, int], dict[str, str]] = {}

    def resource(self, entry: Entry, base: str, *, hashes: bool = True) -> dict[str, Any]:
        """`entry` as the API's object, with its md5Hash and crc32c unless `hashes` is False."""
        found = entry.resource(base)
        if hashes:
            found.update(self.hashes(entry))
        return found

    def hashes(self, entry: Entry) -> dict[str, str]:
        if entry.name.endswith("/"):
            return {"md5Hash": "1B2M2Y8AsgTpgAmY7PhCfg==", "crc32c": "AAAAAA=="}  # of no bytes
        path = self.path(entry.bucket, entry.name)
        key = (str(path), entry.size, entry.mtime_ns)
        if key not in self._hashes:
            found = Hashes.of_file(path)
            self._hashes[key] = {"md5Hash": found.md5 or "", "crc32c": found.crc32c}
        return self._hashes[key]

    # ----- paths ---------------------------------------------------------------------------------
    def _walk_to(self, bucket: str, parts: list[str]) -> Path:
        """`root/bucket/parts...`, refusing a symbolic link on the way (the last part may not exist)."""
        check_bucket(bucket)
        path = self.root / bucket
        for part in [*parts[:-1], parts[-1]] if parts else []:
            if path.is_symlink():
                raise ObjectError(
                    403, "forbidden", f"gs://{bucket}/{'/'.join(parts)}: its folder is a symbolic link"
                )
            path = path / part
        if path.is_symlink():
            raise ObjectError(403, "forbidden", f"gs://{bucket}/{'/'.join(parts)}: it is a symbolic link")
        return path

    def path(self, bucket: str, name: str) -> Path:
        return self._walk_to(bucket, check_name(bucket, name))

    def bucket_dir(self, bucket: str) -> Path:
        check_bucket(bucket)
        return self.root / bucket

    # ----- reading -------------------------------------------------------------------------------
    def get(self, bucket: str, name: str) -> Entry:
        path = self.path(bucket, name)
        try:
            info = path.stat()
        except OSError:
            info = None
        if info is not None:
            if name.endswith("/") and stat.S_ISDIR(info.st_mode):
                return Entry(bucket, name, 0, info.st_mtime_ns)
            if not name.endswith("/") and stat.S_ISREG(info.st_mode):
                return Entry(bucket, name, info.st_size, info.st_mtime_ns)
        raise ObjectError(404, "notFound", f"No such object: {bucket}/{name}")

    def list(
        self,
        bucket: str,
        prefix: str = "",
        delimiter: str = "",
        start_after: str = "",
        limit: int = DEFAULT_PAGE,
        start_offset: str = "",
    ) -> tuple[list[Entry], list[str], str]:
        """(objects, prefixes, where the next page starts after, or '') under `prefix`, in name order,
        from `start_offset` on."""
        objects: list[Entry] = []
        prefixes: list[str] = []
        seen_prefixes: set[str] = set()
        last = ""
        for entry in self._entries(bucket, prefix):
            if entry.name <= start_after or entry.name < start_offset:
                continue
            rest = entry.name[len(prefix) :]
            if delimiter and delimiter in rest:
                folder = prefix + rest[: rest.index(delimiter) + len(delimiter)]
                if folder in seen_prefixes:
                    continue
                if len(objects) + len(prefixes) >= limit:
                    return objects, prefixes, last
                seen_prefixes.add(folder)
                prefixes.append(folder)
                last = folder + "\U0010ffff"  # a later page starts after everything under it
                continue
            if len(objects) + len(prefixes) >= limit:
                return objects, prefixes, last
            objects.append(entry)
            last = entry.name
        return objects, prefixes, ""

    def _entries(self, bucket: str, prefix: str) -> Iterator[Entry]:
        """Every object of `bucket` whose name starts with `prefix`, in name order (files, and empty
        folders as their markers)."""
        top = self.bucket_dir(bucket)
        if not top.is_dir() or top.is_symlink():
            return
        folder = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        start = top / folder if folder else top
        if folder:
            try:
                self.path(bucket, folder + "/")  # no link on the way, no `..`
            except ObjectError:
                return
        if not start.is_dir() or start.is_symlink():
            return
        yield from self._walk(bucket, start, folder + "/" if folder else "", prefix)

    def _walk(self, bucket: str, folder: Path, name_prefix: str, prefix: str) -> Iterator[Entry]:
        try:
            items = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        found: list[tuple[str, Any]] = []
        for item in items:
            if item.is_symlink():
                continue
            name = name_prefix + item.name
            if item.is_dir(follow_symlinks=False):
                found.append((name + "/", item))
            elif item.is_file(follow_symlinks=False):
                found.append((name, item))
        for name, item in sorted(found, key=lambda pair: pair[0]):
            if not (name.startswith(prefix) or prefix.startswith(name)):
                continue
            if name.endswith("/"):
                inner = list(self._walk(bucket, Path(item.path), name, prefix))
                if inner:
                    yield from inner
                elif name.startswith(prefix):
                    yield Entry(bucket, name, 0, item.stat(follow_symlinks=False).st_mtime_ns)
            else:
                info = item.stat(follow_symlinks=False)
                yield Entry(bucket, name, info.st_size, info.st_mtime_ns)

    # ----- writing -------------------------------------------------------------------------------
    def temp_file(self) -> Path:
        self.scratch.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=self.scratch, prefix="object-")
        os.close(handle)
        return Path(name)

    def commit(self, bucket: str, name: str, temp: Path) -> Entry:
        """The object `name` is now the bytes in `temp` (moved, never copied in place)."""
        path = self.path(bucket, name)
        try:
            if name.endswith("/"):
                if temp.stat().st_size:
                    raise ObjectError(
                        400,
                        "invalid",
                        f"{gs_uri(bucket, name)}: a local run keeps `/`-ended names as folders",
                    )
                self._make_parents(bucket, name)
                path.mkdir(exist_ok=True)
                return self.get(bucket, name)
            self._make_parents(bucket, name)
            if path.is_dir():
                raise ObjectError(
                    409,
                    "conflict",
                    f"{gs_uri(bucket, name)}: a folder of that name holds other objects in this local run",
                )
            shutil.move(str(temp), str(path))
            return self.get(bucket, name)
        finally:
            temp.unlink(missing_ok=True)

    def _make_parents(self, bucket: str, name: str) -> None:
        parts = check_name(bucket, name)
        path = self.bucket_dir(bucket)
        for part in parts[:-1]:
            path = path / part
            if path.is_symlink() or (path.exists() and not path.is_dir()):
                raise ObjectError(
                    409,
                    "conflict",
                    f"{gs_uri(bucket, name)}: {path.relative_to(self.root)} is a file in this local run,"
                    " so it cannot also be a folder",
                )
        path.mkdir(parents=True, exist_ok=True)

    def delete(self, bucket: str, name: str) -> None:
        self.get(bucket, name)
        path = self.path(bucket, name)
        try:
            if name.endswith("/"):
                if not any(path.iterdir()):  # a folder that holds objects has no marker to delete
                    path.rmdir()
            else:
                path.unlink()
        except OSError as exc:
            raise ObjectError(409, "conflict", f"{gs_uri(bucket, name)}: {exc.strerror}") from None

    def copy(self, bucket: str, name: str, to_bucket: str, to_name: str) -> Entry:
        source = self.get(bucket, name)
        temp = self.temp_file()
        if not source.name.endswith("/"):
            shutil.copyfile(self.path(bucket, name), temp)
        return self.commit(to_bucket, to_name, temp)

    def move(self, bucket: str, name: str, to_name: str) -> Entry:
        """Rename an object within its bucket (objects.move): its file is moved, not copied."""
        source = self.get(bucket, name)
        if source.name.endswith("/") or to_name.endswith("/"):
            raise ObjectError(400, "invalid", f"{gs_uri(bucket, name)}: a folder is not moved as an object")
        temp = self.temp_file()
        shutil.move(str(self.path(bucket, name)), str(temp))
        return self.commit(bucket, to_name, temp)
