"""Fuzzing the plain source's framing: any capture bytes are read or refused by name, and played whole.

A FIX capture (``adapter/formats/fix_captures.py``) and a BinaryFILE capture
(``adapter/formats/itch50/capture.py``) are operator input and may hold anything: a message cut
short, a length field at any value, lines of garbage. Reading one either gives the messages
-- every byte of a raw capture kept, warts and all, for the adapters to quarantine -- or
raises ``ValueError``; pacing never fails; an ITCH capture's packets carry every message once,
in order, numbered from 1, each packet within a datagram unless one message alone is larger.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.formats.fix_captures import message_time_ns, read_capture
from feedha.adapter.formats.itch50.capture import itch_frames, read_itch_capture
from feedha.plain_source.capture import due_offsets
from feedha.proto import moldudp64
from tests.format_fuzz import fix_body, fix_frame

PIECES = st.sampled_from(
    [
        fix_frame(fix_body([(35, b"X"), (34, b"1"), (52, b"20260105-14:30:00.000")])),
        fix_frame(fix_body([(35, b"0"), (34, b"2"), (52, b"99991231-23:59:59")])),
        b"8=FIX.4.4\x019=99999\x0135=X\x01",
        b"8=FIX.4.4\x019=\x01",
        b"8=FIX",
        b"20260105-14:30:00.000 : ",
        b"\n",
        b"\r\n",
        b"|",
        b"\x01",
        b"garbage",
    ]
)


@settings(max_examples=150)
@given(st.lists(st.one_of(PIECES, st.binary(max_size=12)), max_size=30))
def test_any_fix_capture_is_read_or_refused_by_name(pieces: list[bytes]) -> None:
    data = b"".join(pieces)
    try:
        capture = read_capture(data)
    except ValueError:
        assert b"8=FIX" not in data or len(data) > 1 << 30
        return
    assert all(message.strip() for message in capture.messages)
    # Every message is bytes of the capture (a line's "|" read as SOH), none made up.
    assert all(m in data or m.replace(b"\x01", b"|") in data for m in capture.messages)
    for speed in (None, 1.0, 1e-300, 1e300):
        offsets = due_offsets(capture.messages, speed=speed, time_of=message_time_ns)
        assert len(offsets) == len(capture.messages) and offsets == sorted(offsets)


@st.composite
def binary_files(draw: Any) -> bytes:
    """A BinaryFILE capture whose u16 lengths are drawn at their boundaries, the last cut short."""
    parts = []
    for _ in range(draw(st.integers(1, 12))):
        size = draw(st.sampled_from((0, 1, 2, 35, 36, 37, 30_000, 65_534, 65_535)))
        parts.append(size.to_bytes(2, "big") + bytes([draw(st.integers(0, 255))]) * size)
    data = b"".join(parts)
    return data[: draw(st.integers(0, len(data)))] if draw(st.booleans()) else data


@settings(max_examples=60)
@given(binary_files(), st.integers(1, 20))
def test_any_binary_file_plays_every_message_once_in_datagrams(data: bytes, batch: int) -> None:
    try:
        capture = read_itch_capture(data)
    except ValueError:
        assert data == b""
        return
    played = []
    for first in range(0, len(capture.messages), batch):
        for frame in itch_frames(capture.messages, first, min(first + batch, len(capture.messages))):
            packet = moldudp64.decode_packet(frame)
            assert len(frame) <= moldudp64.MAX_PACKET_BYTES or packet.message_count == 1
            played += [(packet.sequence + i, m) for i, m in enumerate(packet.messages)]
    assert played == list(enumerate(capture.messages, start=1))
