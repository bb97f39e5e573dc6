"""The source ring (adapter/core/ring.py): what it keeps for a snapshot's replay, and its bounds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.core.ring import SourceRing
from feedha.adapter.formats.feedha_fix.parser import Converter
from feedha.adapter.formats.feedha_fix.table import ConverterTable
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


def test_a_pump_call_is_kept_and_dropped_whole_and_replayed_across_runs() -> None:
    ring = SourceRing(10)
    calls = [[(_message(seq), 1) for seq in range(first, first + 6)] for first in (1, 7, 13)]
    for frames in calls:
        ring.extend(list(frames), len(frames), sum(len(f) for f, _c in frames))
    # 18 messages: dropping the first call leaves 12 >= 10, dropping the second too would leave 6.
    assert repr(ring).startswith("<SourceRing [frames=12, messages=12,")
    ring.add(_message(19), 1)  # 13: the oldest call still holds messages the bound needs
    assert repr(ring).startswith("<SourceRing [frames=13, messages=13,")
    parse = Converter(ConverterTable.load()).parse
    kept = ring.messages(parse, after=10, upto=19, wanted=lambda seq: True)
    assert [m.source_seq for m in kept] == list(range(11, 20))
    ring.extend([], 0, 0)  # a call that kept nothing is not a run
    assert repr(ring).startswith("<SourceRing [frames=13,")


def test_the_byte_bound_cuts_into_a_call_frame_by_frame_and_keeps_the_newest() -> None:
    ring = SourceRing(1000, max_bytes=4096)
    frames = [(_message(seq) + b"x" * 1000, 1) for seq in range(1, 11)]  # ~1.1 kB each
    ring.extend(list(frames), 10, sum(len(f) for f, _c in frames))
    kept = list(ring.frames())
    assert kept == frames[-3:] and sum(len(f) for f, _c in kept) <= 4096  # a fourth would exceed it
    huge = [(_message(11) + b"y" * 10_000, 1)]
    ring.extend(huge, 1, len(huge[0][0]))
    assert list(ring.frames()) == huge
    assert repr(ring) == f"<SourceRing [frames=1, messages=1, bytes={len(huge[0][0])}]>"


@settings(max_examples=400, deadline=None)
@given(
    size=st.integers(1, 40),
    max_bytes=st.integers(1, 400),
    calls=st.lists(st.lists(st.tuples(st.integers(0, 120), st.integers(1, 9)), max_size=30), max_size=10),
    single=st.lists(st.booleans(), min_size=10, max_size=10),
)
def test_the_ring_keeps_a_suffix_within_both_bounds_and_no_whole_call_it_does_not_need(
    size: int, max_bytes: int, calls: list[list[tuple[int, int]]], single: list[bool]
) -> None:
    # A model of what may be kept, checked after each call: the frames added, in order,
    # of which the ring keeps the newest. Each call goes in through extend() (a pump call)
    # or frame by frame through add() (the Python path).
    ring, added = SourceRing(size, max_bytes=max_bytes), []
    for index, call in enumerate(calls):
        frames = [(bytes([index]) * length, converted) for length, converted in call]
        if single[index]:
            for frame, converted in frames:
                ring.add(frame, converted)
        else:
            ring.extend(list(frames), sum(c for _f, c in frames), sum(len(f) for f, _c in frames))
        added += frames
        kept = list(ring.frames())
        held, count = sum(len(f) for f, _c in kept), sum(c for _f, c in kept)
        assert repr(ring) == f"<SourceRing [frames={len(kept)}, messages={count}, bytes={held}]>"
        assert kept == added[len(added) - len(kept) :]  # the newest, in order
        if added:
            assert kept, "the newest frame is always kept"
        assert held <= max_bytes or len(kept) == 1  # the byte bound
        if len(kept) < len(added):  # what was dropped: the count bound allowed it, or the bytes forced it
            before = added[len(added) - len(kept) - 1]
            assert count >= size or held + len(before[0]) > max_bytes
        runs = ring._runs
        assert len(runs) <= 1 or count - runs[0][2] < size  # no whole oldest run beyond the count bound
