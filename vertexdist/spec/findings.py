"""One finding of a rule about one field: an error (Vertex refuses it) or a warning (likely a mistake)."""

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
    api_message: str | None = (
        None  # Vertex's own words for this refusal, where known (the emulator says them)
    )
