"""The one gs:// reader (vertexdist.wire.gcs_uri), which the emulator's storage, the outputs, the image
builds, the package upload and the local runs all use."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vertexdist.errors import VertexdistError
from vertexdist.wire.gcs_uri import GsUri, GsUriError, is_gs_uri, local_gs_path, parse_gs_uri


def test_a_bucket_and_a_name() -> None:
    assert parse_gs_uri("gs://b") == GsUri("b", "")
    assert parse_gs_uri("gs://b/p/q/") == GsUri("b", "p/q/")
    assert parse_gs_uri("gs://b/p/q/").prefix == "p/q"
    assert parse_gs_uri("gs://b/obj.tar.gz", object_name=True).name == "obj.tar.gz"
    assert str(parse_gs_uri("gs://b/p")) == "gs://b/p" and str(parse_gs_uri("gs://b")) == "gs://b"
    assert is_gs_uri("gs://b") and not is_gs_uri("/gcs/b")


@pytest.mark.parametrize("text", ["s3://b/p", "gs://", "gs:///p", "/gcs/b/p", "GS://b/p", ""])
def test_anything_else_is_a_clear_error(text: str) -> None:
    with pytest.raises(GsUriError, match="is not a gs://BUCKET") as caught:
        parse_gs_uri(text, what="the output folder")
    assert isinstance(caught.value, VertexdistError) and caught.value.hint
    assert caught.value.message.startswith(f"the output folder {text!r}")


def test_an_object_needs_a_name() -> None:
    with pytest.raises(GsUriError, match="gs://BUCKET/OBJECT"):
        parse_gs_uri("gs://b", object_name=True)
    with pytest.raises(GsUriError):
        parse_gs_uri("gs://b/", object_name=True)


def test_where_a_uri_lives_for_a_local_run(tmp_path: Path) -> None:
    assert local_gs_path("gs://b/p/q", tmp_path) == tmp_path / "b" / "p" / "q"
    assert local_gs_path("gs://b/p/", tmp_path) == tmp_path / "b" / "p"
    assert local_gs_path("gs://b", tmp_path) == tmp_path / "b"
    with pytest.raises(GsUriError):
        local_gs_path("/elsewhere", tmp_path)


def test_repeated_slashes_are_one_and_never_leave_the_root(tmp_path: Path) -> None:
    # `/gcs/b//x` is `/gcs/b/x` on a replica; a name starting with a slash must not become an absolute path.
    assert local_gs_path("gs://b//x", tmp_path) == tmp_path / "b" / "x"
    assert local_gs_path("gs://b/p//q/", tmp_path) == tmp_path / "b" / "p" / "q"


@pytest.mark.parametrize("uri", ["gs://b/../x", "gs://b/p/../../etc", "gs://b/./p", "gs://b/.."])
def test_a_dot_part_is_refused_rather_than_walked(uri: str, tmp_path: Path) -> None:
    with pytest.raises(GsUriError, match=r"'\.\.'") as caught:
        local_gs_path(uri, tmp_path)
    assert caught.value.hint


def _both(uri: str, root: Path) -> tuple[Path | None, Path | None]:
    """What vertexdist and the bundled trainer (which cannot import it) make of one URI: a path, or None
    for a refusal."""
    from trainer_pkg.config import local_path
    from trainer_pkg.errors import TrainerError

    try:
        ours: Path | None = local_gs_path(uri, root)
    except GsUriError:
        ours = None
    try:
        trainers: Path | None = local_path(uri, {"VERTEXDIST_GCS_ROOT": str(root)})
    except TrainerError:
        trainers = None
    return ours, trainers


@pytest.mark.parametrize(
    "uri", ["gs://b", "gs://b/", "gs://b/p/q", "gs://b//x", "gs:///x", "gs://", "gs://b/../x", "gs://b/./p/"]
)
def test_vertexdist_and_the_trainer_map_gs_uris_alike(uri: str) -> None:
    ours, trainers = _both(uri, Path("/r"))
    assert ours == trainers


@given(st.lists(st.sampled_from(["b", "p", "", ".", "..", "x.csv", "a b"]), min_size=1, max_size=5))
def test_they_agree_on_any_uri(parts: list[str]) -> None:
    uri = "gs://" + "/".join(parts)
    ours, trainers = _both(uri, Path("/r"))
    assert ours == trainers
    assert ours is None or ours.is_relative_to(Path("/r"))
