"""The one reader of Cloud Storage URIs: `gs://BUCKET[/NAME]` into its bucket and object name (or folder
prefix), and where such a URI lives on this machine for a local run (`<gs root>/BUCKET/NAME`, the mapping
VERTEXDIST_GCS_ROOT stands for). Pure: no storage client.

The shipped launcher and the trainer, which run where vertexdist is not installed, keep their own copy of
the local mapping (`trainer_pkg` reads VERTEXDIST_GCS_ROOT itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vertexdist.errors import VertexdistError

SCHEME = "gs://"


class GsUriError(VertexdistError):
    """Text that is not the gs:// URI it should be."""


@dataclass(frozen=True)
class GsUri:
    bucket: str
    name: str  # everything after `gs://BUCKET/`, as written: an object's name, or a folder's prefix

    @property
    def prefix(self) -> str:
        """The name as a folder prefix: no leading or trailing slash (`gs://b/p/q/` -> `p/q`)."""
        return self.name.strip("/")

    def __str__(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.name}" if self.name else f"{SCHEME}{self.bucket}"


def parse_gs_uri(uri: str, *, what: str = "URI", object_name: bool = False) -> GsUri:
    """`gs://BUCKET[/NAME]`; GsUriError unless it has the scheme and a bucket (and, with `object_name`, an
    object's name after it). `what` names the URI in the message (`the output folder`, ...)."""
    bucket, _, name = uri.removeprefix(SCHEME).partition("/")
    if not uri.startswith(SCHEME) or not bucket or (object_name and not name):
        shape = "gs://BUCKET/OBJECT" if object_name else "gs://BUCKET or gs://BUCKET/PATH"
        raise GsUriError(f"{what} {uri!r} is not a {shape} URI", hint=f"write {shape}")
    return GsUri(bucket, name)


def is_gs_uri(text: str) -> bool:
    return text.startswith(SCHEME)


def local_gs_path(uri: str, gs_root: Path) -> Path:
    """Where `gs://B/p` lives for replicas whose gs:// root is `gs_root` (`<gs_root>/B/p`), as the replica
    sees it through the mount (`/gcs/B/p`: repeated slashes are one); GsUriError for text that is no gs://
    URI, or whose name has a `.` or `..` part (it would name a place outside its bucket's folder).

    The bundled trainer keeps a copy (`trainer_pkg.config.local_path`: it never imports vertexdist), held to
    the same answers by tests/wire/test_gcs_uri.py."""
    parsed = parse_gs_uri(uri)
    parts = [part for part in parsed.name.split("/") if part]
    if any(part in (".", "..") for part in parts):
        raise GsUriError(
            f"{uri!r} has a '.' or '..' in its name: it has no folder under the gs:// root",
            hint="name the object by its full path inside the bucket",
        )
    return Path(gs_root, parsed.bucket, *parts)
