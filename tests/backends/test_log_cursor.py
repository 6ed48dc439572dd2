"""The Cloud Logging follow cursor: no entry twice, none skipped, across pages and polls, entries that arrive
late included as long as they are no later than the overlap window (the one gap it accepts, shown too)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from vertexdist.backends.log_cursor import TailCursor

S = 1_000_000_000


@dataclass(frozen=True)
class Written:
    time_ns: int  # the entry's timestamp
    visible_ns: int  # when Cloud Logging starts returning it
    insert_id: str


def follow(entries: list[Written], polls: list[int], page: int, overlap_ns: int) -> list[str]:
    """What a follower prints: Cloud Logging's view at each poll time, read from the cursor's floor, in
    (timestamp, insertId) order, `page` entries per request."""
    cursor = TailCursor(overlap_ns=overlap_ns)
    shown: list[str] = []
    for now in polls:
        floor = cursor.floor_ns
        visible = sorted(
            (e for e in entries if e.visible_ns <= now and (floor is None or e.time_ns >= floor)),
            key=lambda e: (e.time_ns, e.insert_id),
        )
        for start in range(0, len(visible), page):
            batch = visible[start : start + page]
            fresh, cursor = cursor.advance([(e.time_ns, e.insert_id) for e in batch])
            shown += [batch[i].insert_id for i in fresh]
    return shown


def test_pages_and_polls_give_every_entry_once_in_order() -> None:
    entries = [Written(t * S // 10, t * S // 10, f"id{t:03d}") for t in range(100)]
    shown = follow(entries, polls=[2 * S, 5 * S, 5 * S, 11 * S], page=7, overlap_ns=3 * S)
    assert shown == [e.insert_id for e in entries]


def test_entries_with_one_timestamp_are_told_apart_by_insert_id() -> None:
    entries = [Written(S, S, f"same-{n}") for n in range(5)] + [Written(2 * S, 2 * S, "later")]
    assert follow(entries, polls=[S, S, 3 * S], page=2, overlap_ns=S) == [
        "same-0", "same-1", "same-2", "same-3", "same-4", "later"
    ]  # fmt: skip


def test_a_late_entry_inside_the_window_is_shown_once_after_newer_ones() -> None:
    entries = [Written(10 * S, 10 * S, "a"), Written(12 * S, 12 * S, "c"), Written(11 * S, 14 * S, "b")]
    assert follow(entries, polls=[13 * S, 15 * S, 20 * S], page=10, overlap_ns=5 * S) == ["a", "c", "b"]


def test_an_entry_later_than_the_window_is_the_accepted_gap() -> None:
    entries = [Written(10 * S, 10 * S, "a"), Written(30 * S, 30 * S, "c"), Written(11 * S, 40 * S, "b")]
    assert follow(entries, polls=[31 * S, 41 * S], page=10, overlap_ns=5 * S) == ["a", "c"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 5), st.integers(0, 3)), min_size=1, max_size=60),
    st.lists(st.integers(0, 80), min_size=1, max_size=12),
    st.integers(1, 9),
)
def test_no_repeats_and_no_gaps_when_entries_arrive_within_the_window(
    spec: list[tuple[int, int, int]], polls: list[int], page: int
) -> None:
    overlap = 6 * S
    entries = [
        Written(t * S, (t + delay) * S, f"{replica}-{n:03d}") for n, (t, delay, replica) in enumerate(spec)
    ]
    times = [*sorted(p * S for p in polls), 200 * S]  # a last poll once everything is visible
    shown = follow(entries, times, page, overlap)
    assert len(shown) == len(set(shown))
    assert sorted(shown) == sorted(e.insert_id for e in entries)
