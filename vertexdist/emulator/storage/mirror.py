"""The emulated Cloud Storage and the jobs' gs:// folder kept as one: what replicas see at `/gcs`.

On Vertex `/gcs/BUCKET/o` is the object gs://BUCKET/o itself (Cloud Storage FUSE). Here the replicas of
every emulator job see one folder at `/gcs` (`<data dir>/gcs`, see `vertexdist.local.gcs_mount`), while
the storage emulator keeps its objects in its own store. So:

- `pull()`, before a job starts: every object that is new or changed in the storage emulator since it
  was last mirrored (an input a client uploaded with google-cloud-storage, a model another job published)
  is written to `<folder>/BUCKET/NAME` (to a temporary file first, then renamed: a running job never reads
  half of one); a mirrored file whose object was deleted goes too, unless a job changed it since.
- `push()`, when a job ends: every file that is new or changed under the folder since it was last mirrored
  is uploaded, and an object whose mirrored file a job deleted is deleted, unless a client changed it since.

Both remember, per object, its md5 and the file's size and mtime as mirrored (`<data dir>/gcs-mirror.json`),
so neither reads what did not change. Objects the folder cannot hold (a name with an empty or `..`
segment; a name that is also another object's folder, `a` and `a/b`) are left out, as gcsfuse leaves
them out of its listing. Empty folders a job makes are not objects (Cloud Storage has none).

Symbolic links a job makes are never followed: `push` uploads nothing if the folder itself is a link, and
no file reached through one (a bucket folder, a subfolder or the file itself); `pull` writes, makes and
deletes nothing below a folder that is a link (else an object `B/etc/x` could land in /etc).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote, urlencode

from vertexdist.backends.output_files import linked_folder, reached_within
from vertexdist.backends.outputs import md5_base64
from vertexdist.emulator.storage.server import StorageEmulator
from vertexdist.errors import VertexdistError
from vertexdist.private_files import write_private_json

_log = logging.getLogger(__name__)
STATE_FILE = "gcs-mirror.json"
TIMEOUT_S = 300
PAGE_SIZE = 1000  # Cloud Storage's largest page of a listing


@dataclass(frozen=True)
class _Object:
    md5: str
    size: int


def _local_name(name: str) -> PurePosixPath | None:
    """An object's path under its bucket's folder, or None if no file can stand for it."""
    parts = name.split("/")
    if not name or any(p in ("", ".", "..") for p in parts) or "\0" in name:
        return None
    return PurePosixPath(*parts)


class StorageMirror:
    """`storage`'s objects as files under `folder` (`folder/BUCKET/NAME`), and back; thread-safe."""

    def __init__(self, storage: StorageEmulator, folder: Path, state_file: Path) -> None:
        self._storage = storage
        self.folder = Path(folder)
        self._state_file = Path(state_file)
        self._lock = threading.Lock()
        self.page_size = PAGE_SIZE

    # --- the storage emulator's JSON API ---------------------------------------------------------------
    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self._storage.endpoint}{path}", timeout=TIMEOUT_S) as response:
            return json.loads(response.read() or b"{}")

    def _items(self, path: str, **query: str) -> Iterator[dict[str, Any]]:
        """Every item of a listing, page after page (Cloud Storage answers at most `maxResults` at a time,
        with a `nextPageToken` for the rest)."""
        token = ""
        while True:
            page = {**query, "maxResults": str(self.page_size), **({"pageToken": token} if token else {})}
            answer = self._get(f"{path}?{urlencode(page)}")
            yield from answer.get("items") or []
            token = answer.get("nextPageToken") or ""
            if not token:
                return

    def _objects(self) -> dict[str, _Object]:
        """`BUCKET/NAME` -> md5 and size, of every object of every bucket."""
        found: dict[str, _Object] = {}
        for bucket in self._items("/storage/v1/b", project="emulator"):
            name = bucket.get("name") or bucket.get("id")
            if not name:
                continue
            for item in self._items(f"/storage/v1/b/{quote(name, safe='')}/o"):
                found[f"{name}/{item['name']}"] = _Object(item.get("md5Hash", ""), int(item.get("size", 0)))
        return found

    def _download(self, key: str, dest: Path) -> None:
        bucket, _, name = key.partition("/")
        where = f"b/{quote(bucket, safe='')}/o/{quote(name, safe='')}"
        url = f"{self._storage.endpoint}/download/storage/v1/{where}"
        temp = dest.with_name(f".{dest.name}.vertexdist-mirror")
        try:
            with (
                urllib.request.urlopen(f"{url}?alt=media", timeout=TIMEOUT_S) as response,
                open(temp, "wb") as out,
            ):
                shutil.copyfileobj(response, out, 1 << 20)
            os.replace(temp, dest)
        finally:
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()

    def _delete(self, key: str) -> None:
        bucket, _, name = key.partition("/")
        url = f"{self._storage.endpoint}/storage/v1/b/{quote(bucket, safe='')}/o/{quote(name, safe='')}"
        with contextlib.suppress(urllib.error.HTTPError):  # already gone
            urllib.request.urlopen(urllib.request.Request(url, method="DELETE"), timeout=TIMEOUT_S).close()

    # --- what was mirrored ------------------------------------------------------------------------------
    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self._state_file.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _save(self, state: dict[str, dict[str, Any]]) -> None:
        write_private_json(self._state_file, state)

    @staticmethod
    def _stat(path: Path) -> tuple[int, int] | None:
        try:
            info = path.stat()
        except OSError:
            return None
        return (info.st_size, info.st_mtime_ns) if path.is_file() and not path.is_symlink() else None

    @staticmethod
    def _entry(md5: str, stat: tuple[int, int]) -> dict[str, Any]:
        return {"md5": md5, "size": stat[0], "mtime_ns": stat[1]}

    @staticmethod
    def _unchanged(entry: dict[str, Any] | None, stat: tuple[int, int] | None) -> bool:
        return entry is not None and stat is not None and (entry.get("size"), entry.get("mtime_ns")) == stat

    def _path(self, key: str) -> Path | None:
        """Where the object `key` is mirrored; None if no file can stand for it, or if a folder on the way
        is a symbolic link (a job's: the place it points to is not the mirror's)."""
        bucket, _, name = key.partition("/")
        relative = _local_name(name)
        if relative is None or not bucket:
            return None
        path = self.folder / bucket / relative
        link = linked_folder(self.folder, path.parent)
        if link is not None:
            _log.warning("gs://%s is not in the jobs' /gcs: %s is a symbolic link", key, link)
            return None
        return path

    # --- the two directions -----------------------------------------------------------------------------
    def pull(self) -> int:
        """Objects new or changed in storage since the last mirror, written to the folder; how many."""
        with self._lock:
            state = self._load()
            objects = self._objects()
            written = 0
            for key, obj in sorted(objects.items()):
                if key.endswith("/"):  # a folder placeholder (the console's "Create folder")
                    path = self._path(key.rstrip("/"))
                    if path is not None and not path.exists():
                        with contextlib.suppress(OSError):
                            path.mkdir(parents=True, exist_ok=True)
                    continue
                path = self._path(key)
                entry = state.get(key)
                if path is None or (entry is not None and entry.get("md5") == obj.md5):
                    continue  # unchanged in storage (what a job changed since goes up with push)
                stat = self._stat(path)
                if stat is not None and stat[0] == obj.size and md5_base64(path) == obj.md5:
                    state[key] = self._entry(obj.md5, stat)
                    continue
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    if path.is_dir():
                        raise IsADirectoryError(str(path))
                    self._download(key, path)
                except (OSError, urllib.error.URLError) as exc:  # `a` beside `a/b`, say: gcsfuse hides it too
                    _log.warning("gs://%s is not in the jobs' /gcs: %s", key, exc)
                    continue
                stat = self._stat(path)
                if stat is not None:
                    state[key] = self._entry(obj.md5, stat)
                    written += 1
            for key in [k for k in state if k not in objects]:
                path = self._path(key)
                if path is not None and self._unchanged(state[key], self._stat(path)):
                    with contextlib.suppress(OSError):
                        path.unlink()
                    del state[key]
                elif path is None or self._stat(path) is None:
                    del state[key]
            self._save(state)
            return written

    def push(self) -> int:
        """Files new or changed in the folder since the last mirror, uploaded; deleted files' objects
        deleted. How many objects changed."""
        with self._lock:
            if self.folder.is_symlink():
                _log.warning("%s is a symbolic link: nothing under it is uploaded", self.folder)
                return 0
            if not self.folder.is_dir():
                return 0
            state = self._load()
            objects = self._objects()
            changed = 0
            seen: set[str] = set()
            for bucket in sorted(p for p in self.folder.iterdir() if p.is_dir() and not p.is_symlink()):
                for root, _dirs, names in os.walk(bucket):
                    for file in names:
                        path = Path(root, file)
                        if file.endswith(".vertexdist-mirror"):
                            continue  # a download of pull's, not a job's file
                        key = f"{bucket.name}/{path.relative_to(bucket).as_posix()}"
                        stat = self._stat(path)
                        if stat is None or not reached_within(self.folder, path):
                            continue
                        seen.add(key)
                        entry = state.get(key)
                        if self._unchanged(entry, stat):
                            continue
                        md5 = md5_base64(path)
                        known = objects.get(key)
                        if known is None or known.md5 != md5:
                            try:
                                self._storage.ensure_bucket(bucket.name)
                                self._storage.upload(path, f"gs://{key}")
                            except (VertexdistError, OSError, urllib.error.URLError) as exc:
                                _log.warning("%s could not be uploaded to gs://%s: %s", path, key, exc)
                                continue  # tried again at the next push
                            changed += 1
                        state[key] = self._entry(md5, stat)
            for key in [k for k in state if k not in seen]:
                known = objects.get(key)
                if known is not None and known.md5 == state[key].get("md5"):
                    self._delete(key)  # the job deleted the file; a client did not change the object since
                    changed += 1
                del state[key]
            self._save(state)
            return changed
