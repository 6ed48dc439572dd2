"""Does an image tag already exist? Two thin edges behind one small protocol (tests inject their own).

- `ArtifactRegistryChecker` asks the registry's Docker v2 API (`GET /v2/PROJECT/REPO/IMAGE/manifests/TAG`)
  with the caller's Google credentials, as `docker manifest inspect` does through gcloud's helper.
- `DockerManifestChecker` runs `docker manifest inspect`, for `--local` builds.
"""

from __future__ import annotations

import subprocess
from typing import Any, Protocol

from vertexdist.container.image import ImageRef
from vertexdist.errors import VertexdistError

_MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)


def no_credentials(purpose: str) -> VertexdistError:
    return VertexdistError(
        f"no Google credentials {purpose}",
        hint="run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS",
    )


class ImageChecker(Protocol):
    def exists(self, image: ImageRef) -> bool:
        """Whether `image` (repository, name and tag) is already in the registry."""
        ...


class ArtifactRegistryChecker:
    """Registry v2 `manifests` lookup with Application Default Credentials."""

    def __init__(self, session: Any = None, timeout_s: float = 30.0, endpoint: str | None = None) -> None:
        self._session = session
        self._timeout_s = timeout_s
        # Default: the repository's own host over HTTPS; tests point it at a local registry.
        self._endpoint = endpoint

    def _authorized_session(self) -> Any:
        if self._session is None:
            import google.auth
            from google.auth.exceptions import DefaultCredentialsError
            from google.auth.transport.requests import AuthorizedSession

            try:
                credentials, _ = google.auth.default(
                    scopes=["https://www.googleapis.com/auth/cloud-platform"]
                )
            except DefaultCredentialsError:
                raise no_credentials("to look the image up in Artifact Registry") from None
            self._session = AuthorizedSession(credentials)
        return self._session

    def exists(self, image: ImageRef) -> bool:
        repo = image.repository
        base = self._endpoint or f"https://{repo.host}"
        url = f"{base}/v2/{repo.project}/{repo.name}/{image.image}/manifests/{image.tag}"
        response = self._authorized_session().head(
            url, headers={"Accept": _MANIFEST_TYPES}, timeout=self._timeout_s
        )
        if response.status_code == 200:
            return True
        if response.status_code == 404:
            return False
        raise VertexdistError(
            f"Artifact Registry answered {response.status_code} for {image.uri}",
            hint="check `gcloud auth application-default login` and that the repository exists",
        )


class DockerManifestChecker:
    """`docker manifest inspect IMAGE:TAG` (uses docker's own registry credentials)."""

    def __init__(self, docker: str = "docker", timeout_s: float = 60.0) -> None:
        self._docker = docker
        self._timeout_s = timeout_s

    def exists(self, image: ImageRef) -> bool:
        result = subprocess.run(
            [self._docker, "manifest", "inspect", image.uri],
            capture_output=True,
            text=True,
            timeout=self._timeout_s,
            check=False,
        )
        if result.returncode == 0:
            return True
        message = (result.stderr or result.stdout).strip()
        if "no such manifest" in message.lower() or "not found" in message.lower():
            return False
        raise VertexdistError(
            f"`docker manifest inspect {image.uri}` failed: {message or f'exit {result.returncode}'}",
            hint="run `gcloud auth configure-docker REGION-docker.pkg.dev` so docker can read the registry",
        )
