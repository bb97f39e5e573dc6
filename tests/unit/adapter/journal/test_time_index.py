"""The journal's time index: kept as the writer appends, rebuilt on recovery, exact for lookups."""

from __future__ import annotations

from pathlib import Path

from feedha.adapter.journal import JournalConfig, JournalReader, JournalWriter
from feedha.adapter.journal.time_index import TimeIndex, rebuild_time_index

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
CONFIG = JournalConfig(segment_bytes=64 * 1024, index_interval_bytes=1024)


def _write(path: Path, count: int, *, first: int = 1) -> list[int]:
    # One record per millisecond, ~200 bytes each: many index entries, several segments.
    with JournalWriter(path, CONFIG) as journal:
        for seq in range(first, first + count):
            journal.append(seq, T0 + seq * MS, 1, seq, bytes(200))
        return [t for t, _ in journal.time_index.entries()]


def _first_at_or_after(path: Path, time_ns: int, index: TimeIndex) -> int:
    for record in JournalReader(path).read(index.start_for(time_ns)):
        if record.time_ns >= time_ns:
            return record.msg_seq
    return -1


def test_every_lookup_starts_before_the_first_record_of_its_time(tmp_path: Path) -> None:
    times = _write(tmp_path, 2000)
    assert len(times) > 100  # sparse, but not one entry
    with JournalWriter(tmp_path, CONFIG) as reopened:
        index = reopened.time_index  # rebuilt on recovery
    for seq in (1, 2, 77, 640, 1000, 1999, 2000):
        assert _first_at_or_after(tmp_path, T0 + seq * MS, index) == seq
        assert index.start_for(T0 + seq * MS) <= seq
    assert index.start_for(T0) == 0  # before everything: read from the start
    reader = JournalReader(tmp_path)
    for time_ns in (T0, T0 + 333 * MS + 1, T0 + 2000 * MS, T0 + 5000 * MS):
        assert reader.seek_time(time_ns, index) == reader.seek_time(time_ns)


def test_the_rebuilt_index_equals_the_one_kept_while_writing(tmp_path: Path) -> None:
    with JournalWriter(tmp_path, CONFIG) as journal:
        for seq in range(1, 1500):
            journal.append(seq, T0 + seq * MS, 1, seq, bytes(150))
        kept = journal.time_index.entries()
    assert rebuild_time_index(tmp_path).entries() == kept
    reopened = JournalWriter(tmp_path, CONFIG)
    try:
        assert reopened.time_index.entries() == kept
        reopened.append(1500, T0 + 1500 * MS, 1, 1500, bytes(150))
    finally:
        reopened.close()


def test_times_are_made_non_decreasing_so_a_clock_step_back_cannot_break_the_bisection() -> None:
    index = TimeIndex()
    for seq, time_ns in ((1, 100), (50, 300), (90, 200), (130, 400)):
        index.add(seq, time_ns)
    index.add(120, 999)  # an older msg_seq is ignored
    assert index.entries() == [(100, 1), (300, 50), (300, 90), (400, 130)]
    assert index.start_for(350) == 90
    assert index.start_for(300) == 1
    index.drop_before(95)
    assert index.entries() == [(300, 90), (400, 130)]
