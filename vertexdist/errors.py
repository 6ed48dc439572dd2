"""Typed errors of the library. The CLI turns them into messages in one place (`vertexdist.cli.main`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# error: Vertex would refuse it; warning: likely a mistake; note: fine, but worth knowing.
Severity = Literal["error", "warning", "note"]


@dataclass(frozen=True)
class Problem:
    """One finding about one field of one template file: `FILE:LINE:COL: field.path: message`."""

    file: str
    line: int
    col: int
    path: str
    message: str
    hint: str | None = None
    severity: Severity = "error"

    def location(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def one_line(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{self.location()}: {where}{self.message}"


class VertexdistError(Exception):
    """Base of every error the CLI reports without a traceback."""

    exit_code: int = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(VertexdistError):
    """The command line itself is wrong (exit 2)."""

    exit_code = 2


class NotFoundError(VertexdistError):
    """What the command names is not there: a job id no folder or service holds (exit 1, as a 404 from
    Vertex exits; the command line itself was fine)."""


@dataclass
class TemplateError(VertexdistError):
    """A template (or several) could not be loaded or failed validation."""

    problems: list[Problem] = field(default_factory=list)

    def __post_init__(self) -> None:
        first = self.problems[0].one_line() if self.problems else "invalid template"
        more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        VertexdistError.__init__(self, first + more, self.problems[0].hint if self.problems else None)


class JobFailedError(VertexdistError):
    """A job ran and failed (exit 1)."""
