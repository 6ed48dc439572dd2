"""From a template with `build` to an image URI: plan (context, hash, tag, Build request), then build only
when the tag is not in the registry yet.

`plan_build` reads files but calls nothing remote: it is what `--dry-run` prints and what `submit
--dry-run` renders with. `ensure_image` is the one call `submit` makes; the registry check, the upload,
Cloud Build and the docker CLI are injectable edges.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from vertexdist.container.cloud import join_object
from vertexdist.container.cloudbuild import build_request, config_path_for, load_config
from vertexdist.container.context import (
    DEFAULT_MAX_CONTEXT_BYTES,
    BuildContext,
    ContextError,
    collect_context,
    content_hash,
    image_tag,
    write_context_tar,
)
from vertexdist.container.image import ImageRef, parse_repository
from vertexdist.container.registry import ImageChecker
from vertexdist.errors import UsageError, VertexdistError
from vertexdist.wire.gcs_uri import parse_gs_uri

if TYPE_CHECKING:
    from vertexdist.spec import JobTemplate

PIP_REQUIREMENTS_ARG = "PIP_REQUIREMENTS"


@dataclass(frozen=True)
class BuildPlan:
    """Everything decided before anything is built or sent."""

    context: BuildContext
    build_args: Mapping[str, str]
    content_hash: str
    image: ImageRef
    context_uri: str
    config_path: Path
    request: Mapping[str, Any]

    @property
    def image_uri(self) -> str:
        return self.image.uri


@dataclass(frozen=True)
class ImageResult:
    """The image a job runs, and what it took to have it."""

    image_uri: str
    content_hash: str
    built: bool
    uploaded: bool = False
    local_only: bool = False  # built into the local daemon and not pushed (on the local stand-in base)


def build_args_for(template: JobTemplate) -> dict[str, str]:
    """The template's build args; its `trainer.requirements` feed the Dockerfile's dependency layer."""
    assert template.build is not None
    args = dict(template.build.build_args)
    requirements = list(getattr(template.trainer, "requirements", None) or [])
    if requirements and PIP_REQUIREMENTS_ARG not in args:
        args[PIP_REQUIREMENTS_ARG] = " ".join(requirements)
    return args


def _require_build(template: JobTemplate) -> None:
    if template.build is None:
        where = f" {template.source_path}" if template.source_path else ""
        raise UsageError(
            f"the template{where} has no `build` section, so there is no image to build",
            hint="add `build: {repository: REGION-docker.pkg.dev/PROJECT/REPO}` to the template",
        )


def plan_build(template: JobTemplate, *, max_context_bytes: int = DEFAULT_MAX_CONTEXT_BYTES) -> BuildPlan:
    """Collect and hash the context and prepare the Build request; nothing remote is called."""
    _require_build(template)
    build = template.build
    assert build is not None
    context = collect_context(Path(build.context), Path(build.dockerfile), max_bytes=max_context_bytes)
    args = build_args_for(template)
    digest = content_hash(context, args)
    tag = image_tag(digest)
    repository = parse_repository(build.repository)
    image = ImageRef(repository, build.image, tag)
    staging = parse_gs_uri(template.staging_bucket)
    bucket, prefix = staging.bucket, staging.prefix
    context_object = join_object(prefix, "vertexdist", "build-contexts", f"{digest}.tar.gz")
    config_path = config_path_for(context.root)
    request = build_request(
        load_config(config_path),
        project_id=repository.project,
        source_bucket=bucket,
        source_object=context_object,
        substitutions={
            "_REGION": repository.region,
            "_REPOSITORY": repository.name,
            "_IMAGE": build.image,
            "_DOCKERFILE": context.dockerfile,
            "_TAG": tag,
        },
        build_args=args,
        logs_bucket=f"gs://{join_object(bucket, prefix, 'vertexdist', 'build-logs')}",
        tags=("vertexdist", tag),
    )
    return BuildPlan(context, args, digest, image, f"gs://{bucket}/{context_object}", config_path, request)


class CloudRunner(Protocol):
    def upload(self, tar_path: Path, bucket: str, object_name: str) -> bool: ...
    def run(self, request: Mapping[str, Any]) -> Any: ...


class LocalRunner(Protocol):
    def build_and_push(
        self, context_tar: Path, image_uri: str, dockerfile: str, build_args: Mapping[str, str]
    ) -> bool | None:
        """False where the image was kept in the local daemon, not pushed (built on the local stand-in)."""
        ...


@contextmanager
def packed_context(plan: BuildPlan) -> Iterator[Path]:
    """The plan's context as a `.tar.gz` in a temporary folder, checked to still hash as planned."""
    with tempfile.TemporaryDirectory(prefix="vertexdist-context-") as tmp:
        tar_path = Path(tmp) / f"{plan.content_hash}.tar.gz"
        with open(tar_path, "wb") as out:
            written = write_context_tar(plan.context, out, plan.build_args)
        if written != plan.content_hash:
            raise ContextError(
                "files in the build context changed while it was being packed",
                hint="try again once nothing writes into the context folder",
            )
        yield tar_path


def _in_registry(checker: ImageChecker, plan: BuildPlan, *, local: bool, log: Callable[[str], None]) -> bool:
    """Whether the registry has the tag; a `--local` build goes on where the registry cannot be asked (an
    offline machine), since its image may serve local runs only (`vertexdist.container.standin`)."""
    if not local:
        return checker.exists(plan.image)
    try:
        return checker.exists(plan.image)
    except VertexdistError as error:
        from vertexdist.container.docker import docker_image_exists_locally

        if docker_image_exists_locally(plan.image_uri):
            log(f"the registry cannot be asked ({error}); the local daemon has {plan.image_uri}")
            return True
        log(f"the registry cannot be asked about {plan.image_uri} ({error}); building with the local daemon")
        return False


def ensure_image(
    template: JobTemplate,
    *,
    local: bool = False,
    checker: ImageChecker | None = None,
    cloud: CloudRunner | None = None,
    docker: LocalRunner | None = None,
    log: Callable[[str], None] = print,
    max_context_bytes: int = DEFAULT_MAX_CONTEXT_BYTES,
    plan: BuildPlan | None = None,
) -> ImageResult:
    """The image URI for a template with `build`, building and pushing it only if its tag is missing."""
    plan = plan or plan_build(template, max_context_bytes=max_context_bytes)
    if local and docker is None:
        from vertexdist.container.docker import DockerCliRunner

        default_docker = DockerCliRunner(log=log)
        default_docker.require_daemon()  # before asking the registry: without a daemon nothing can follow
        docker = default_docker
    if checker is None:
        from vertexdist.container.registry import ArtifactRegistryChecker, DockerManifestChecker

        checker = DockerManifestChecker() if local else ArtifactRegistryChecker()
    if _in_registry(checker, plan, local=local, log=log):
        log(f"{plan.image_uri} exists; nothing to build")
        return ImageResult(plan.image_uri, plan.content_hash, built=False)
    with packed_context(plan) as tar_path:
        uploaded = False
        if local:
            assert docker is not None
            pushed = docker.build_and_push(tar_path, plan.image_uri, plan.context.dockerfile, plan.build_args)
            if pushed is False:
                return ImageResult(plan.image_uri, plan.content_hash, built=True, local_only=True)
        else:
            if cloud is None:
                from vertexdist.container.cloud import CloudBuildRunner

                cloud = CloudBuildRunner(log=log)
            context = parse_gs_uri(plan.context_uri)
            bucket, object_name = context.bucket, context.prefix
            uploaded = cloud.upload(tar_path, bucket, object_name)
            log(f"context {'uploaded to' if uploaded else 'already at'} {plan.context_uri}")
            cloud.run(plan.request)
    if not checker.exists(plan.image):
        raise VertexdistError(
            f"the build finished but {plan.image_uri} is not in the registry",
            hint=f"the build config ({plan.config_path}) must push the image tagged with _TAG",
        )
    return ImageResult(plan.image_uri, plan.content_hash, built=True, uploaded=uploaded)
