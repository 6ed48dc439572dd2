"""A run folder's JSON files as the local backend and its tuning part read them: whole objects only, so a
file being written (or one from elsewhere) reads as nothing yet rather than failing a status or a list."""

from __future__ import annotations

from pathlib import Path

from vertexdist.backends.local.run_folders import read_run_json


def test_a_whole_object_is_read(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text('{"state": "JOB_STATE_SUCCEEDED", "replicas": []}')
    assert read_run_json(tmp_path / "summary.json") == {"state": "JOB_STATE_SUCCEEDED", "replicas": []}


def test_a_missing_half_written_or_non_object_file_reads_as_empty(tmp_path: Path) -> None:
    assert read_run_json(tmp_path / "missing.json") == {}
    (tmp_path / "half.json").write_text('{"state": "JOB_STA')
    assert read_run_json(tmp_path / "half.json") == {}
    (tmp_path / "list.json").write_text("[1, 2]")
    assert read_run_json(tmp_path / "list.json") == {}
    (tmp_path / "folder.json").mkdir()
    assert read_run_json(tmp_path / "folder.json") == {}
