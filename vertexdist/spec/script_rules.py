"""Rules that read the training code's entry file as text (cheap, never imported): a script that uses
`AIP_MODEL_DIR` (or its checkpoint and TensorBoard siblings) as a local path.

Vertex sets those variables to `gs://` URIs. `open(os.environ["AIP_MODEL_DIR"] + "/model.pt", "w")` does not
fail: it writes into a relative folder named `gs:` in the replica's working folder, which nobody sees, and
the job's outputs stay empty. Cloud Storage FUSE mounts every bucket under `/gcs/`, so the path to write is
`/gcs/` + the rest of the URI. Pure (reads one file).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from vertexdist.spec.findings import Finding

if TYPE_CHECKING:
    from vertexdist.spec.models import JobTemplate

# The variables that hold gs:// URIs: Vertex's output folders.
URI_VARIABLES = ("AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR")
_VARIABLE = "|".join(URI_VARIABLES)
# os.environ["X"], os.environ.get("X"...), os.getenv("X"...), environ["X"]
_READ = re.compile(
    rf"""(?:os\.)?(?:environ\s*\[\s*['"](?P<a>{_VARIABLE})['"]\s*\]"""
    rf"""|environ\.get\(\s*['"](?P<b>{_VARIABLE})['"]|getenv\(\s*['"](?P<c>{_VARIABLE})['"])"""
)
# A call that takes a local path: open, os.path.join, Path, os.makedirs/mkdir, torch.save and the like.
_PATH_USE = re.compile(
    r"(?:\bopen|os\.path\.join|\bPath|os\.makedirs|os\.mkdir|\.save|\.save_pretrained|\.to_csv|\.savez?)\s*\("
)
# A line that turns the URI into a path (or hands it to a library that writes gs:// itself) is fine.
_CONVERTED = re.compile(r"/gcs/|gs://|gcsfs|fsspec|storage\.Client|tf\.io|SummaryWriter|replace\(")
SCAN_BYTES = 1 << 20  # an entry file larger than this is not read


def entry_file(t: JobTemplate) -> Path | None:
    """The file the replicas run first: the script, or the package's module (not the bundled trainer)."""
    trainer = t.trainer
    if trainer.script is not None:
        return Path(trainer.script)
    if trainer.package is None or trainer.is_bundled or not trainer.module:
        return None
    parts = trainer.module.split(".")
    package = Path(trainer.package)
    if parts[0] == package.name:
        parts = parts[1:]
    return package.joinpath(*parts).with_suffix(".py") if parts else package / "__init__.py"


def uri_used_as_path(text: str) -> list[tuple[int, str]]:
    """(line number, variable) of each line that passes a gs:// URI variable to a call that takes a local
    path, without turning it into one first (pure)."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        read = _READ.search(code)
        if read is None or not _PATH_USE.search(code) or _CONVERTED.search(code):
            continue
        found.append((number, read["a"] or read["b"] or read["c"]))
    return found


def model_dir_used_as_path(t: JobTemplate) -> Iterator[Finding]:
    """A warning per line of the entry file that writes to AIP_MODEL_DIR (and its siblings) as a path."""
    path = entry_file(t)
    if path is None:
        return
    try:
        with path.open("rb") as handle:
            text = handle.read(SCAN_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return
    field = "trainer.script" if t.trainer.script is not None else "trainer.module"
    for number, variable in uri_used_as_path(text):
        yield Finding(
            field,
            f"{path.name}:{number} uses {variable} as a local path; it is a gs:// URI, so this writes into"
            " a folder named `gs:` in the replica's working folder, and the job's outputs stay empty",
            f"{variable} is a gs:// URI; write under /gcs/... (`/gcs/` + the rest), e.g."
            f' os.environ["{variable}"].replace("gs://", "/gcs/", 1)',
            "warning",
        )


RULES: tuple[Callable[[JobTemplate], Iterator[Finding]], ...] = (model_dir_used_as_path,)
