"""The one gs:// reader (vertexdist.wire.gcs_uri), which the emulator's storage, the outputs, the image
builds, the package upload and the local runs all use."""

from __future__ import annotations

from pathlib import Path

import pytest

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
