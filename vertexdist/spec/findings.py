"""What a rule reports: one problem (or warning) about one field of a template."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vertexdist.errors import Severity


@dataclass(frozen=True)
class Finding:
    path: str
    message: str
    hint: str | None = None
    severity: Severity = "error"
    on_key: bool = False  # the problem is the mapping key itself (placed on the key, not its value)
