"""Image names in Artifact Registry: `REGION-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG` (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from vertexdist.errors import VertexdistError

_REPOSITORY = re.compile(r"^(?P<region>[a-z0-9-]+)-docker\.pkg\.dev/(?P<project>[^/]+)/(?P<repo>[^/]+)$")


@dataclass(frozen=True)
class Repository:
    """An Artifact Registry Docker repository."""

    region: str
    project: str
    name: str

    @property
    def host(self) -> str:
        return f"{self.region}-docker.pkg.dev"

    def __str__(self) -> str:
        return f"{self.host}/{self.project}/{self.name}"


def parse_repository(text: str) -> Repository:
    match = _REPOSITORY.match(text.strip().rstrip("/"))
    if match is None:
        raise VertexdistError(
            f"{text!r} is not an Artifact Registry repository",
            hint="write REGION-docker.pkg.dev/PROJECT/REPO,"
            " e.g. us-central1-docker.pkg.dev/my-project/trainers",
        )
    return Repository(match["region"], match["project"], match["repo"])


@dataclass(frozen=True)
class ImageRef:
    """One tagged image."""

    repository: Repository
    image: str
    tag: str

    @property
    def name(self) -> str:
        """The image without its tag."""
        return f"{self.repository}/{self.image}"

    @property
    def uri(self) -> str:
        return f"{self.name}:{self.tag}"

    def with_tag(self, tag: str) -> ImageRef:
        return ImageRef(self.repository, self.image, tag)
