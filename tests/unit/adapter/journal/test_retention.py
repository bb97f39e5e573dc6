from __future__ import annotations

from pathlib import Path

from feedha.adapter.journal.format import segment_name
from feedha.adapter.journal.retention import select_expired
from feedha.adapter.journal.segment import SegmentInfo

S = 1_000_000_000


def seg(first_seq: int, size: int, mtime_s: int) -> SegmentInfo:
    return SegmentInfo(
        path=Path(segment_name(day=19000, first_seq=first_seq)),
        day=19000,
        first_seq=first_seq,
        size=size,
        mtime_ns=mtime_s * S,
    )


SEGMENTS = [seg(1, 100, 10), seg(50, 100, 20), seg(90, 100, 30), seg(120, 100, 40)]


def names(chosen: list[SegmentInfo]) -> list[int]:
    return [info.first_seq for info in chosen]


def test_by_age_oldest_first_never_newest() -> None:
    assert names(select_expired(SEGMENTS, now_ns=45 * S, max_age_ns=20 * S, max_bytes=None)) == [1, 50]
    assert names(select_expired(SEGMENTS, now_ns=10**6 * S, max_age_ns=1, max_bytes=None)) == [1, 50, 90]


def test_by_total_size() -> None:
    assert names(select_expired(SEGMENTS, now_ns=0, max_age_ns=None, max_bytes=250)) == [1, 50]
    assert names(select_expired(SEGMENTS, now_ns=0, max_age_ns=None, max_bytes=0)) == [1, 50, 90]
    assert select_expired(SEGMENTS, now_ns=0, max_age_ns=None, max_bytes=400) == []


def test_active_segment_and_later_ones_are_kept() -> None:
    keep = SEGMENTS[1].name
    assert names(select_expired(SEGMENTS, now_ns=10**6 * S, max_age_ns=1, max_bytes=None, keep=keep)) == [1]


def test_no_limits_no_deletion() -> None:
    assert select_expired(SEGMENTS, now_ns=10**6 * S, max_age_ns=None, max_bytes=None) == []
