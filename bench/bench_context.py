"""Build-context speed for this repository, and what an unchanged second `vertexdist build` does.

1. Context creation + hashing (walk, ignore rules, sha256 of every file): budget 0.5 s.
   Also the full reproducible .tar.gz, and as a baseline `tar czf` of the same file list, same script.
2. Two `ensure_image` runs on an unchanged template: the first uploads the context (to the Cloud Storage
   emulator) and builds; the second must upload nothing and build nothing. There is no Cloud Build or
   Docker daemon here, so the builder is a stand-in that records the request and marks the tag pushed;
   the upload, the hash and the decision are the real code.

    .venv/bin/python bench/bench_context.py
"""

from __future__ import annotations

import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from vertexdist.container.cloud import CloudBuildRunner  # noqa: E402
from vertexdist.container.context import collect_context, content_hash, write_context_tar  # noqa: E402
from vertexdist.container.ensure import ensure_image  # noqa: E402
from vertexdist.container.image import ImageRef  # noqa: E402

BUDGET_S = 0.5
ROUNDS = 7


def timed(fn: Callable[[], object], rounds: int = ROUNDS) -> tuple[float, float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return min(samples), statistics.median(samples)


def context_figures() -> None:
    dockerfile = REPO / "Dockerfile"
    context = collect_context(REPO, dockerfile)
    print(f"repository context: {len(context.entries)} files, {context.total_bytes / 1024:.1f} KiB")

    def hash_only() -> None:
        content_hash(collect_context(REPO, dockerfile))

    def full_tar() -> None:
        write_context_tar(collect_context(REPO, dockerfile), io.BytesIO())

    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "files.txt"
        listing.write_text("\n".join(context.paths()) + "\n")
        out = Path(tmp) / "baseline.tar.gz"

        def baseline() -> None:
            subprocess.run(["tar", "czf", str(out), "-C", str(REPO), "-T", str(listing)], check=True)

        rows = [
            ("context + hash (vertexdist)", timed(hash_only)),
            ("context + hash + .tar.gz (vertexdist)", timed(full_tar)),
            ("tar czf same files (baseline)", timed(baseline)),
        ]
    print(f"{'step':40s} {'min s':>8s} {'median s':>9s} {'median/budget':>14s}")
    for name, (best, median) in rows:
        print(f"{name:40s} {best:8.4f} {median:9.4f} {median / BUDGET_S:13.1%}")
    base = rows[2][1][1]
    print(f"vertexdist .tar.gz vs tar czf (median): {rows[1][1][1] / base:.2f}x; budget {BUDGET_S} s")
    a = io.BytesIO()
    b = io.BytesIO()
    write_context_tar(context, a)
    with tempfile.TemporaryDirectory() as tmp:
        # A fresh copy: new folder, new mtimes, same content.
        copy = Path(tmp) / "copy"
        for entry in context.entries:
            target = copy / entry.path
            target.parent.mkdir(parents=True, exist_ok=True)
            if entry.link_target is not None:
                target.symlink_to(entry.link_target)
            else:
                target.write_bytes(entry.source.read_bytes())
                target.chmod(entry.mode)
        write_context_tar(collect_context(copy, copy / "Dockerfile"), b)
    same = a.getvalue() == b.getvalue()
    print(f"fresh copy elsewhere gives the same bytes: {same} ({len(a.getvalue())} bytes)")


class StandInRegistry:
    def __init__(self) -> None:
        self.tags: set[str] = set()

    def exists(self, image: ImageRef) -> bool:
        return image.uri in self.tags


class StandInBuilder:
    """Real upload (google-cloud-storage -> emulator); the build itself is recorded, not run."""

    def __init__(self, registry: StandInRegistry, storage: Any) -> None:
        self.registry = registry
        self.real = CloudBuildRunner(storage=storage, log=lambda _line: None)
        self.uploads = 0
        self.builds = 0

    def upload(self, tar_path: Path, bucket: str, object_name: str) -> bool:
        sent = self.real.upload(tar_path, bucket, object_name)
        self.uploads += int(sent)
        return sent

    def run(self, request: Mapping[str, Any]) -> Any:
        self.builds += 1
        build = request["build"]
        tag = build["substitutions"]["_TAG"]
        s = build["substitutions"]
        self.registry.tags.add(
            f"{s['_REGION']}-docker.pkg.dev/{request['projectId']}/{s['_REPOSITORY']}/{s['_IMAGE']}:{tag}"
        )
        return None


def second_run_figures() -> None:
    os.environ.setdefault("NO_GCE_CHECK", "true")
    from vertexdist.emulator.storage.server import StorageEmulator

    server = StorageEmulator()
    server.start()
    try:
        server.ensure_bucket("vd-staging")
        os.environ["STORAGE_EMULATOR_HOST"] = server.endpoint
        from google.cloud import storage

        from vertexdist.spec import load_template

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "job.yaml"
            path.write_text(
                "display_name: bench\nproject: vertexdist-demo\nlocation: us-central1\n"
                "staging_bucket: gs://vd-staging/staging\nmachine_type: n1-standard-4\nreplica_count: 2\n"
                f"build:\n  context: {REPO}\n  dockerfile: {REPO / 'Dockerfile'}\n"
                "  repository: us-central1-docker.pkg.dev/vertexdist-demo/trainers\n"
            )
            template = load_template(path)
            registry = StandInRegistry()
            builder = StandInBuilder(registry, storage.Client(project="vertexdist-demo"))
            for run in (1, 2):
                uploads, builds = builder.uploads, builder.builds
                start = time.perf_counter()
                result = ensure_image(template, checker=registry, cloud=builder, log=lambda _line: None)
                elapsed = time.perf_counter() - start
                print(
                    f"run {run}: {elapsed:.3f} s, uploads {builder.uploads - uploads}, builds "
                    f"{builder.builds - builds}, built={result.built} -> {result.image_uri}"
                )
    finally:
        server.stop()


if __name__ == "__main__":
    context_figures()
    second_run_figures()
