"""An older emulator's buckets (gcp-storage-emulator's `.cloudstorage/.meta`) are imported once on start: an
object the store now refuses (its metadata is not a map of strings) is left out with a warning, and every
other object still comes across."""

from __future__ import annotations

import json
from pathlib import Path

from vertexdist.emulator.storage.server import StorageEmulator


def test_one_refused_object_does_not_stop_the_import(tmp_path: Path) -> None:
    old = tmp_path / ".cloudstorage"
    (old / "bkt").mkdir(parents=True)
    (old / "bkt" / "good.txt").write_text("kept")
    (old / "bkt" / "bad.txt").write_text("refused")
    meta = {
        "buckets": {"bkt": {}},
        "objects": {
            "bkt": {
                "bad.txt": {"contentType": "text/plain", "metadata": ["not", "a", "map"]},
                "good.txt": {"contentType": "text/plain", "metadata": {"k": "v"}},
            }
        },
    }
    (old / ".meta").write_text(json.dumps(meta))
    storage = StorageEmulator(data_dir=tmp_path)
    try:
        assert list(storage.store.names("bkt")) == ["good.txt"]
        assert not old.exists()
    finally:
        storage.stop()
