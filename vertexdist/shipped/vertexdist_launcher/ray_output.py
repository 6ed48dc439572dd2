"""The Ray driver's output, readable: the driver prints every Ray process's lines as Ray forwards them, and a
few of those are noise that vertexdist itself causes or makes moot. They are left out here, line by line; the
user's own lines and Ray's real errors pass unchanged.

- Ray Train's PlacementGroupCleaner actor asks Ray's state API (served by the dashboard, which the launcher
  does not start) whether the controller lives, once a second: "Failed to query Ray Train Controller actor
  state ... Continuing to monitor", or a traceback when several Ray clusters share the machine. It exists to
  remove a placement group after a crashed controller; vertexdist stops the whole cluster when the driver
  ends, so nothing is lost without it. Its lines are dropped.
- Paths through the short link to a node's temp folder (`ray_node.short_temp_dir`, for Ray's socket paths):
  the link goes with the job, the folder stays, so they are shown as the folder (Ray Tune's
  `tensorboard --logdir ...`, Ray Data's "Full logs are in ...").

Lines are passed on whole; a line without its newline yet is passed on at `flush()`, as it came.
"""

from __future__ import annotations

import io
import os
import sys
import threading
from typing import TextIO

LINK_VARIABLE = "VERTEXDIST_RAY_TEMP_LINK"  # "LINK=FOLDER": the head node's temp folder and its short link
DROPPED_ACTORS = ("(PlacementGroupCleaner pid=",)
DROPPED_LINES = ("Failed to query Ray Train Controller actor state",)


class LineEditor:
    def __init__(self, links: dict[str, str]) -> None:
        self._links = sorted(links.items(), key=lambda item: -len(item[0]))

    def __call__(self, line: str) -> str | None:
        """The line as shown, or None to leave it out."""
        if any(marker in line for marker in DROPPED_LINES):
            return None
        if any(line.lstrip().startswith(actor) for actor in DROPPED_ACTORS):
            return None
        for link, folder in self._links:
            line = line.replace(link, folder)
        return line

    @classmethod
    def from_env(cls, value: str) -> LineEditor:
        link, sep, folder = value.partition("=")
        return cls({link.rstrip("/") + "/": folder.rstrip("/") + "/"} if sep and link and folder else {})


class EditedLines(io.TextIOBase):
    """A text stream that hands each whole line to `edit` and writes what it returns to `target`."""

    def __init__(self, target: TextIO, edit: LineEditor) -> None:
        self._target = target
        self._edit = edit
        self._partial = ""
        self._lock = threading.Lock()  # Ray prints forwarded lines from a thread of its own

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            data = self._partial + text
            *lines, self._partial = data.split("\n")
            shown = [edited for line in lines if (edited := self._edit(line)) is not None]
            if shown:
                self._target.write("".join(f"{line}\n" for line in shown))
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._partial:
                self._target.write(self._partial)
                self._partial = ""
            self._target.flush()

    def fileno(self) -> int:
        return self._target.fileno()

    def isatty(self) -> bool:
        return self._target.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._target.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self._target.errors


def edit_driver_output() -> None:
    """From here on, this process's sys.stdout and sys.stderr leave Ray's noise out (see above)."""
    edit = LineEditor.from_env(os.environ.pop(LINK_VARIABLE, ""))
    sys.stdout = EditedLines(sys.stdout, edit)
    sys.stderr = EditedLines(sys.stderr, edit)
