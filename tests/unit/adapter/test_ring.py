"""The source ring (adapter/core/ring.py): what it keeps for a snapshot's replay, and its bounds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.conversion.parser import Converter
from feedha.adapter.conversion.table import ConverterTable
from feedha.adapter.core.ring import SourceRing
from feedha.proto import fix


def _message(seq: int) -> bytes:
    entry = fix.SourceEntry(fix.ENTRY_TRADE, "10.5", 1)
    return fix.encode_market_data(source_seq=seq, symbol="IBM", event_time_ns=seq, entries=[entry])


def test_the_ring_keeps_at_least_its_size_in_messages_and_replays_them_in_order() -> None:
    ring = SourceRing(10)
    for first in range(1, 41, 4):  # frames of four messages
        ring.add(b"".join(_message(seq) for seq in range(first, first + 4)), 4)
    assert repr(ring).startswith("<SourceRing [frames=3, messages=12,")
    parse = Converter(ConverterTable.load()).parse
    kept = ring.messages(parse, after=30, upto=39, wanted=lambda seq: seq % 2 == 1)
    assert [m.source_seq for m in kept] == [31, 33, 35, 37, 39]


def test_the_ring_drops_old_frames_past_its_byte_bound_but_keeps_the_newest() -> None:
    ring = SourceRing(1000, max_bytes=4096)
    padding = b"x" * 3000  # one message a frame, padded with garbage a hostile source adds
    for seq in range(1, 101):
        ring.add(_message(seq) + padding, 1)
    assert repr(ring).startswith("<SourceRing [frames=1, messages=1,")  # two would exceed 4096 bytes
    huge = _message(101) + b"y" * 10_000
    ring.add(huge, 1)
    assert repr(ring) == f"<SourceRing [frames=1, messages=1, bytes={len(huge)}]>"


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(1, 40),
    max_bytes=st.integers(1, 400),
    runs=st.lists(st.lists(st.tuples(st.integers(0, 120), st.integers(0, 9)), max_size=30), max_size=8),
)
def test_a_run_of_frames_kept_at_once_keeps_what_adding_each_keeps(
    size: int, max_bytes: int, runs: list[list[tuple[int, int]]]
) -> None:
    # The source pump books a run's frames in one pass; the ring must end as the Python
    # path's frame-by-frame adds leave it, under both bounds.
    one_by_one, at_once = SourceRing(size, max_bytes=max_bytes), SourceRing(size, max_bytes=max_bytes)
    for index, run in enumerate(runs):
        frames = [(bytes([index]) * length, converted) for length, converted in run]
        for frame, converted in frames:
            one_by_one.add(frame, converted)
        at_once.extend(frames)
        assert repr(at_once) == repr(one_by_one)
        assert list(at_once._frames) == list(one_by_one._frames)
