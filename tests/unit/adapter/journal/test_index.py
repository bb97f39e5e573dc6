from __future__ import annotations

from feedha.adapter.journal.segment import SparseIndex


def test_floor_finds_last_entry_at_or_before() -> None:
    index = SparseIndex()
    assert index.floor(5) is None
    for seq, offset in [(10, 32), (20, 1000), (35, 2000)]:
        index.add(seq, offset)
    assert index.floor(9) is None
    assert index.floor(10) == (10, 32)
    assert index.floor(19) == (10, 32)
    assert index.floor(20) == (20, 1000)
    assert index.floor(10**9) == (35, 2000)
    assert index.entries() == [(10, 32), (20, 1000), (35, 2000)]
    assert repr(index) == "<SparseIndex [entries=3, last=(35, 2000)]>"
