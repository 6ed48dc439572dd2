"""Following Cloud Logging with no entry twice and none skipped across pages and polls (pure).

Cloud Logging returns entries by timestamp, ties by insertId (https://cloud.google.com/logging/docs/reference/
v2/rest/v2/LogEntry: insertId "is also used to order log entries that have the same logName and timestamp"),
but an entry can turn up seconds after entries with later timestamps were already returned: each replica's
VM ships its own logs. So every read asks again from `overlap` before the newest timestamp returned so far,
and drops what it returned already, known by (timestamp, insertId) for exactly that window. The one gap this
leaves: an entry that arrives more than `overlap` late, behind a newer one already shown. That is the price
of not re-reading the whole log on every poll.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

OVERLAP_NS = 10 * 1_000_000_000

EntryKey = tuple[int, str]  # (timestamp in ns since the epoch, insertId)


@dataclass(frozen=True)
class TailCursor:
    """The newest timestamp returned, and the entries returned in the `overlap` before it."""

    newest_ns: int | None = None
    seen: frozenset[EntryKey] = frozenset()
    overlap_ns: int = OVERLAP_NS

    @property
    def floor_ns(self) -> int | None:
        """Where the next read starts: nothing older can still be new to this cursor."""
        return None if self.newest_ns is None else self.newest_ns - self.overlap_ns

    def advance(self, keys: Sequence[EntryKey]) -> tuple[list[int], TailCursor]:
        """Which of `keys` (one read's entries, in order) are new, by index, and the cursor after them."""
        floor = self.floor_ns
        seen = set(self.seen)
        newest = self.newest_ns
        fresh = []
        for index, key in enumerate(keys):
            # Older than the window: returned before, or the one gap this cursor accepts (see above).
            if key in seen or (floor is not None and key[0] < floor):
                continue
            fresh.append(index)
            seen.add(key)
            newest = key[0] if newest is None else max(newest, key[0])
        if newest is None:
            return fresh, self
        keep_from = newest - self.overlap_ns
        window = frozenset(key for key in seen if key[0] >= keep_from)
        return fresh, TailCursor(newest, window, self.overlap_ns)
