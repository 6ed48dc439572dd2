"""Resumable upload sessions of the Cloud Storage JSON API, on disk, for both servers of it: the emulator's
(`emulator/storage/store.py`) and a local run's over its gs:// folder (`local/gcs_server.py`).

A session is two files in its folder: `<id>.json` (what the upload is for, as the server that started it
wrote it, and once the object is made, `done`: what the server answers a repeated last chunk with) and
`<id>.part` (the bytes received so far, in order). Ids are 32 hex digits; anything else is "no such session".
A chunk is placed by where it starts (`append`): bytes already received are skipped (a client resending after
a lost answer), a gap is refused. https://cloud.google.com/storage/docs/performing-resumable-uploads
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vertexdist.gcs_body import StoreError

_ID = re.compile(r"[0-9a-f]{32}")


def write_json(path: Path, value: Any) -> None:
    """Replace `path` with `value` in one step (a crash leaves the old file or the new one)."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    temp.write_text(json.dumps(value, indent=1))
    os.replace(temp, path)


class UploadSessions:
    """The sessions under `folder`. Chunks of one session come one after another (a
    client sends the next once the last is answered); different sessions never share a file."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)  # made by the first `start`

    def _path(self, upload_id: str) -> Path:
        if not _ID.fullmatch(upload_id):
            raise StoreError(404, "notFound", "No such upload session.")
        return self.folder / f"{upload_id}.json"

    def start(self, session: dict[str, Any]) -> str:
        """A new session for `session` (JSON; its `done` is set to None); its id."""
        upload_id = secrets.token_hex(16)
        path = self._path(upload_id)
        self.folder.mkdir(parents=True, exist_ok=True)
        path.with_suffix(".part").touch()
        write_json(path, {**session, "done": None})
        return upload_id

    def get(self, upload_id: str) -> tuple[dict[str, Any], int]:
        """The session and how many bytes it has received; 404 for one never started or cancelled."""
        path = self._path(upload_id)
        try:
            session = json.loads(path.read_text())
        except (OSError, ValueError):
            raise StoreError(404, "notFound", "No such upload session.") from None
        part = path.with_suffix(".part")
        return session, (part.stat().st_size if part.exists() else 0)

    def append(self, upload_id: str, start: int, chunks: Iterable[bytes]) -> int:
        """Add bytes from offset `start` (bytes already received are skipped); the new count received."""
        _session, received = self.get(upload_id)
        if start > received:
            for _ in chunks:
                pass
            raise StoreError(
                400, "invalid", f"The upload has {received} bytes; a chunk cannot start at byte {start}."
            )
        skip = received - start
        with open(self._path(upload_id).with_suffix(".part"), "ab") as out:
            for chunk in chunks:
                if skip:
                    dropped = min(skip, len(chunk))
                    chunk, skip = chunk[dropped:], skip - dropped
                if chunk:
                    out.write(chunk)
            return out.tell()

    def take(self, upload_id: str, temp: Path) -> None:
        """Move the bytes received to `temp`, for the server to make the object of."""
        os.replace(self._path(upload_id).with_suffix(".part"), temp)

    def finish(self, upload_id: str, done: dict[str, Any]) -> None:
        """The object is made: `done` is what a repeated last chunk is answered with."""
        session, _received = self.get(upload_id)
        write_json(self._path(upload_id), {**session, "done": done})

    def cancel(self, upload_id: str) -> None:
        """Forget the session and its bytes (404 if there is none)."""
        path = self._path(upload_id)
        self.get(upload_id)
        path.with_suffix(".part").unlink(missing_ok=True)
        path.unlink(missing_ok=True)

    def forget_finished(self) -> None:
        """Remove the sessions whose object was made (and unreadable ones): a restart keeps only uploads
        still under way."""
        for session in self.folder.glob("*.json"):
            try:
                done = json.loads(session.read_text()).get("done")
            except (OSError, ValueError):
                done = True
            if done:
                session.unlink(missing_ok=True)
                session.with_suffix(".part").unlink(missing_ok=True)
