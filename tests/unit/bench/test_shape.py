"""The bare model's frames and its client's first-copy arbitration (no sockets)."""

from __future__ import annotations

import pytest

from feedha.bench.shape import HEADER, STAMP, _Arbiter, _frames
from feedha.bench.shape_run import ShapeOptions

pytestmark = pytest.mark.timeout(30)

SIZE = 40


def test_frames_carry_consecutive_stamped_messages_of_one_size_in_batches() -> None:
    frames = _frames(5, 10, 4, 1_000, 10.0, b"\x00" * (SIZE - STAMP.size))
    assert [HEADER.unpack_from(f) for f in frames] == [(b"D", 5, 4), (b"D", 9, 4), (b"D", 13, 2)]
    assert [len(f) for f in frames] == [HEADER.size + 4 * SIZE] * 2 + [HEADER.size + 2 * SIZE]
    assert STAMP.unpack_from(frames[1], HEADER.size + SIZE) == (
        10,
        1_000 + 100,
    )  # seq 10, stamped 10 steps on


def test_the_client_keeps_the_first_copy_of_each_message_across_lines() -> None:
    pad = b"\x00" * (SIZE - STAMP.size)
    active = _frames(1, 6, 3, 0, 1.0, pad)  # 1-3, 4-6
    backup = _frames(1, 4, 2, 0, 1.0, pad)  # 1-2, 3-4: overlaps the active's second frame
    arbiter, latencies = _Arbiter(size=SIZE, latency=True), []
    for frame in (active[0], backup[0], backup[1], active[1]):
        arbiter.on_frame(frame, 100, latencies.append)
    assert (arbiter.delivered, arbiter.duplicates, arbiter.gaps, arbiter.last) == (6, 4, 0, 6)
    assert latencies == [100 - seq for seq in range(1, 7)]  # one sample per delivered message


def test_the_client_counts_a_gap_and_never_goes_back() -> None:
    pad = b"\x00" * (SIZE - STAMP.size)
    arbiter = _Arbiter(size=SIZE, latency=False)
    for frame in (
        *_frames(1, 2, 2, 0, 0.0, pad),
        *_frames(6, 2, 2, 0, 0.0, pad),
        *_frames(3, 2, 2, 0, 0.0, pad),
    ):
        arbiter.on_frame(frame, 0, None)
    assert (arbiter.delivered, arbiter.gaps, arbiter.duplicates, arbiter.last) == (4, 3, 2, 7)


def test_options_name_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="relays"):
        ShapeOptions(relays=0, count=10)
    with pytest.raises(ValueError, match="size"):
        ShapeOptions(relays=1, count=10, size=8)
    with pytest.raises(ValueError, match="hold must be in"):
        ShapeOptions(relays=2, count=10, hold=-0.01)
    with pytest.raises(ValueError, match="hold must be in"):
        ShapeOptions(relays=2, count=10, hold=float("nan"))
    with pytest.raises(ValueError, match="exclusive"):
        ShapeOptions(relays=2, count=10, hold=0.01, journal=True)
