"""The run record: what made a job — the template's text, the request exactly as sent, the SHA-256 of its
package (or its image's digest), the git commit of its code folder and whether it was dirty, the fault plan,
its attempts — kept beside its outputs (`<output base>/vertexdist-records/<job id>/`, with a copy of the
package) and, for a local run, in its run folder. The job carries the commit as a label (`vertexdist-git`),
set on the template before it is rendered, so `render --request`, `submit --dry-run` and the job agree.

`rerun_request` is the recorded request with a fresh output folder and nothing else changed.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vertexdist.render import output_dir_of
from vertexdist.wire.proto_json import now_rfc3339

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate

RECORD_FOLDER = "vertexdist-records"
RECORD_FILE = "record.json"
GIT_LABEL = "vertexdist-git"
FORMAT = 1
_GIT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class CodeState:
    """The code folder's git commit, and whether it had changes not committed (None: not in git)."""

    folder: str
    commit: str | None = None
    dirty: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"folder": self.folder, "commit": self.commit, "dirty": self.dirty}


def code_folder(t: JobTemplate) -> Path | None:
    """The folder the job's code comes from: the build context, the package, or the script's folder."""
    if t.build is not None and t.source_path is not None:
        return (t.source_path.parent / t.build.context).resolve()
    if t.trainer.package is not None:
        return t.trainer.package
    return t.trainer.script.parent if t.trainer.script is not None else None


def _git(folder: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def code_state(folder: Path | None) -> CodeState:
    """`git rev-parse HEAD` and `git status --porcelain -- .` of the folder (none outside git)."""
    if folder is None or not folder.is_dir():
        return CodeState(str(folder or ""))
    commit = _git(folder, "rev-parse", "HEAD")
    if not commit:
        return CodeState(str(folder))
    status = _git(folder, "status", "--porcelain", "--untracked-files=normal", "--", ".")
    return CodeState(str(folder), commit.strip(), None if status is None else bool(status.strip()))


def code_labels(state: CodeState) -> dict[str, str]:
    """`vertexdist-git: <12 hex>[-dirty]`, or nothing for code outside git (pure)."""
    if not state.commit:
        return {}
    return {GIT_LABEL: state.commit[:12] + ("-dirty" if state.dirty else "")}


def with_code_labels(t: JobTemplate) -> JobTemplate:
    """The template with its code's git label among its labels (the model's too, when it takes the job's)."""
    labels = code_labels(code_state(code_folder(t)))
    if not labels:
        return t
    return t.model_copy(update={"labels": {**t.labels, **labels}})


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def image_digest(uri: str | None) -> str | None:
    """The `sha256:...` of an image reference pinned by digest, else None (pure)."""
    if uri and "@sha256:" in uri:
        return "sha256:" + uri.rsplit("@sha256:", 1)[1]
    return None


def make_record(
    t: JobTemplate,
    job: str,
    request: dict[str, Any],
    *,
    package_path: Path | None,
    package_uri: str | None,
    image_uri: str | None = None,
    code: CodeState | None = None,
    fault_plan: str | None = None,
    attempts: list[str] | None = None,
    rerun_of: str | None = None,
) -> dict[str, Any]:
    """The record of one job (JSON-able)."""
    source = t.source_path
    text = source.read_text() if source is not None and source.is_file() else None
    package = None
    if package_path is not None:
        package = {
            "uri": package_uri,
            "file": package_path.name,
            "sha256": sha256_of(package_path),
            "size": package_path.stat().st_size,
        }
    image = {"uri": image_uri, "digest": image_digest(image_uri)} if image_uri else None
    return {
        "format": FORMAT,
        "job": job,
        "created": now_rfc3339(),
        "template": {"path": None if source is None else str(source), "text": text},
        "request": request,
        "package": package,
        "image": image,
        "code": (code or code_state(code_folder(t))).as_dict(),
        "fault_plan": fault_plan,
        "attempts": attempts if attempts is not None else [job],
        "rerun_of": rerun_of,
    }


def record_folder(output_dir: str, job: str) -> str:
    """`<base>/vertexdist-records/<job id>`, beside the job's output folder `<base>/<job folder>`, not in it
    (what the job wrote, and `vertexdist outputs` lists, stays the job's alone); one record per job, even for
    jobs that share a folder. An output folder that is a bucket's root keeps it inside."""
    folder = output_dir.rstrip("/")
    base = folder.rsplit("/", 1)[0]
    where = base if base.count("/") >= 2 else folder  # "gs://b/x" -> "gs://b"; "gs://b" stays
    return f"{where}/{RECORD_FOLDER}/{job.rsplit('/', 1)[-1]}"


def request_output_dir(request: dict[str, Any]) -> str:
    found = output_dir_of(request)
    if not found:
        raise ValueError("the recorded request names no output folder")
    return found


def rerun_request(request: dict[str, Any], job_folder: str) -> dict[str, Any]:
    """The recorded request with its output folder's last part replaced by `job_folder` (pure)."""
    old = request_output_dir(request)
    new = f"{old.rstrip('/').rsplit('/', 1)[0]}/{job_folder}"
    text = json.dumps(request)
    quoted_old, quoted_new = json.dumps(old)[1:-1], json.dumps(new)[1:-1]
    return dict(json.loads(text.replace(f'"{quoted_old}"', f'"{quoted_new}"')))
