"""The resumable, checked download on plain folders (`FolderOutputs`, what a local run folder gives): a part
is continued, a part of another version is dropped, a part that does not belong is fetched again whole,
files already there unchanged are skipped, and names that would escape the folder are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from vertexdist.backends.download import download, part_path
from vertexdist.backends.outputs import FolderOutputs, NoOutputs, OutputFile, output_uri


@pytest.fixture
def source(tmp_path: Path) -> FolderOutputs:
    folder = tmp_path / "gcs" / "bkt" / "out" / "job-1"
    (folder / "model").mkdir(parents=True)
    (folder / "model" / "model.pt").write_bytes(bytes(range(256)) * 4096)
    (folder / "metrics.json").write_text('{"loss": 0.5}')
    return FolderOutputs("gs://bkt/out/job-1", tmp_path / "gcs")


def test_lists_relative_paths_with_sizes(source: FolderOutputs) -> None:
    assert [(f.path, f.size) for f in source.files()] == [("metrics.json", 13), ("model/model.pt", 1 << 20)]


def test_an_output_folder_that_is_a_link_lists_nothing(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not the job's")
    (tmp_path / "gcs" / "bkt" / "out").mkdir(parents=True)
    (tmp_path / "gcs" / "bkt" / "out" / "job-1").symlink_to(outside)
    assert FolderOutputs("gs://bkt/out/job-1", tmp_path / "gcs").files() == []


def test_copies_then_skips_what_is_already_there(source: FolderOutputs, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    first = download(source, source.files(), dest)
    assert sorted(first.downloaded) == ["metrics.json", "model/model.pt"] and first.bytes == (1 << 20) + 13
    assert (dest / "model" / "model.pt").read_bytes() == (source.folder / "model" / "model.pt").read_bytes()
    again = download(source, source.files(), dest)
    assert again.downloaded == [] and sorted(again.skipped) == ["metrics.json", "model/model.pt"]


def test_a_part_is_continued_and_a_foreign_one_redone(source: FolderOutputs, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    (model,) = [f for f in source.files() if f.path == "model/model.pt"]
    part = part_path(dest / "model" / "model.pt", model)
    part.parent.mkdir(parents=True)
    original = (source.folder / "model" / "model.pt").read_bytes()
    part.write_bytes(original[:1000])
    report = download(source, [model], dest)
    assert report.resumed == {"model/model.pt": 1000} and report.bytes == (1 << 20) - 1000
    assert (dest / "model" / "model.pt").read_bytes() == original

    (dest / "model" / "model.pt").unlink()
    part.write_bytes(b"x" * 1000)  # not the start of this file: checked, thrown away, fetched again whole
    download(source, [model], dest)
    assert (dest / "model" / "model.pt").read_bytes() == original
    assert not part.exists()


def test_a_part_of_another_version_is_dropped(source: FolderOutputs, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    (metrics,) = [f for f in source.files() if f.path == "metrics.json"]
    older = OutputFile(metrics.path, metrics.size, version="an-older-version")
    stale = part_path(dest / "metrics.json", older)
    dest.mkdir()
    stale.write_text('{"lo')
    download(source, [metrics], dest)
    assert not stale.exists() and (dest / "metrics.json").read_text() == '{"loss": 0.5}'
    assert sorted(p.name for p in dest.iterdir()) == ["metrics.json"]


@pytest.mark.parametrize("path", ["../escape", "/etc/passwd", "a/../../b", "a\\..\\b"])
def test_names_outside_the_folder_are_refused(source: FolderOutputs, tmp_path: Path, path: str) -> None:
    with pytest.raises(NoOutputs, match="outside the download folder"):
        download(source, [OutputFile(path, 1, "v")], tmp_path / "dest")


def test_the_output_folder_comes_from_the_spec() -> None:
    assert output_uri({"baseOutputDirectory": {"outputUriPrefix": "gs://b/out/job/"}}) == "gs://b/out/job"
    assert output_uri({"workerPoolSpecs": []}) is None
