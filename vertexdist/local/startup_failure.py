"""Whether a failed replica's script failed while it was importing: a missing module, a name a module does
not have, a syntax error. Such a failure is the same on every try, so the runner does not spend the job's
restarts on it, and the job's error carries the exception line and the import's own file and line (under
torchrun the replica's last lines are torchrun's summary box, which names neither). Pure: log lines in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from vertexdist.shipped.vertexdist_launcher.health import shown_name

# How far back in a replica's log its traceback may be: torchrun's box after it is about 20 lines.
TAIL_LINES = 80
# A prefix a launcher puts before each line of a rank's output (`[rank0]: `, torchrun's --tee).
_PREFIX = re.compile(r"^\[(?:rank|default)\d*\]:\s?")
_EXCEPTION = re.compile(
    r"^(?:[\w.]+\.)?(ModuleNotFoundError|ImportError|SyntaxError|IndentationError|TabError)(?::\s.*)?$"
)
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)')
_ANY_EXCEPTION = re.compile(r"^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)(?::|$)")


@dataclass(frozen=True)
class StartupFailure:
    exception: str  # `ModuleNotFoundError: No module named 'foo'`
    file: str | None  # the file of the failing import (the user's own name for a packaged script)
    line: int | None

    def text(self) -> str:
        where = f" ({self.file}, line {self.line})" if self.file is not None else ""
        return f"{self.exception}{where}"


def startup_failure(
    lines: Sequence[str], name_of: Callable[[str], str] = shown_name
) -> StartupFailure | None:
    """The import-time exception that ended the replica's script, with the frame that raised it, from
    `lines` (its log's tail); None when the script's last exception is another kind, or there is none. A
    launcher's own traceback after it (torchrun's ChildFailedError) is not the script's."""
    frames: list[tuple[str, int]] = []
    last: tuple[str, list[tuple[str, int]]] | None = None
    for raw in lines:
        text = _PREFIX.sub("", raw.rstrip())
        if text.startswith("Traceback (most recent call last)"):
            frames = []
        elif (frame := _FRAME.match(text)) is not None:
            frames.append((frame.group(1), int(frame.group(2))))
        elif frames and _ANY_EXCEPTION.match(text):
            own = [f for f in frames if not _plumbing(f[0])]
            if own:
                last = (text, own)
            frames = []
    if last is None or not _EXCEPTION.match(last[0]):
        return None
    filename, line = last[1][-1]
    return StartupFailure(last[0], name_of(filename), line)


def _plumbing(filename: str) -> bool:
    """Frames of the import machinery, runpy, the launchers and torch: never the failing import itself."""
    return (
        filename.startswith("<frozen")
        or any(part in filename for part in ("/importlib/", "/torch/", "/vertexdist_launcher/", "runpy.py"))
        or filename.endswith("/bin/torchrun")
    )
