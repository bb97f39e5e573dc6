"""Captured feeds: reading both capture layouts and pacing the playback (pure)."""

from __future__ import annotations

import pytest

from feedha.adapter.formats.fix_captures import message_time_ns, read_capture
from feedha.plain_source.capture import due_offsets
from tests.fix44_capture import make_capture


def test_raw_and_logged_captures_give_the_same_messages() -> None:
    messages = make_capture(symbols=5, messages=30).messages
    raw = read_capture(b"".join(messages))
    logged = b"".join(b"20260105-14:30:00.%03d : " % i + m + b"\n" for i, m in enumerate(messages))
    piped = b"".join(m.replace(b"\x01", b"|") + b"\r\n" for m in messages)
    assert raw.messages == tuple(messages) and raw.malformed == 0
    assert read_capture(logged).messages == tuple(messages)
    assert read_capture(piped).messages == tuple(messages)


def test_a_malformed_stretch_is_kept_for_the_adapters_to_quarantine() -> None:
    messages = make_capture(symbols=5, messages=10).messages
    broken = messages[1][:-4] + b"99\x01"  # a bad checksum
    capture = read_capture(b"\n".join([messages[0], broken, messages[2]]))
    assert (
        capture.malformed == 1 and capture.messages[0] == messages[0] and capture.messages[-1] == messages[2]
    )
    with pytest.raises(ValueError, match="no FIX message"):
        read_capture(b"hello\n")


def test_pacing_by_rate_by_the_messages_times_or_at_once() -> None:
    def at(stamp: str) -> bytes:
        return b"8=FIX.4.4\x019=5\x0135=0\x0152=" + stamp.encode() + b"\x0110=000\x01"

    messages = [at("20260105-14:30:00.000"), at("20260105-14:30:01.000"), at("20260105-14:30:00.500")]
    assert message_time_ns(messages[1]) is not None
    assert due_offsets(messages, rate=2.0) == [0.0, 0.5, 1.0]
    assert due_offsets(messages, speed=2.0, time_of=message_time_ns) == [0.0, 0.5, 0.5]  # never backwards
    assert due_offsets(messages) == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        due_offsets(messages, rate=1.0, speed=1.0)
    with pytest.raises(ValueError, match="own times"):  # a format played at a rate only (itch50)
        due_offsets(messages, speed=1.0)


def test_a_burst_plays_its_seconds_at_its_rate_then_the_rate_goes_on() -> None:
    messages = [b"m"] * 7
    # 4 a second for 1 s (messages 0-3), then 1 a second from 1 s on.
    assert due_offsets(messages, rate=1.0, burst=(4.0, 1.0)) == [0.0, 0.25, 0.5, 0.75, 1.0, 2.0, 3.0]
    assert due_offsets(messages[:2], rate=1.0, burst=(4.0, 1.0)) == [0.0, 0.25]  # shorter than the burst
    for bad in ((0.0, 1.0), (4.0, -1.0)):
        with pytest.raises(ValueError, match="burst"):
            due_offsets(messages, rate=1.0, burst=bad)
    with pytest.raises(ValueError, match="burst"):
        due_offsets(messages, burst=(4.0, 1.0))  # a burst needs a rate to go on at
