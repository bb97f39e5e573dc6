"""``itch50``'s captures: BinaryFILE files cut into MoldUDP64 packets (no sockets).

What ``feedha source --file F --format itch50`` sends is its capture face's frames
(``adapter/formats/itch50/capture.py``); the registry of faces is checked against the formats'.
"""

from __future__ import annotations

import pytest

from feedha.adapter.formats.capture_registry import CAPTURES, capture_named, chaos_formats, default_capture
from feedha.adapter.formats.itch50.capture import CAPTURE, read_itch_capture
from feedha.adapter.formats.itch50.day import make_itch_capture
from feedha.adapter.formats.registry import FORMATS
from feedha.proto import moldudp64


def _messages(messages: list[bytes]) -> tuple[bytes, ...]:
    data = b"".join(len(m).to_bytes(2, "big") + m for m in messages)
    assert CAPTURE.write(messages) == data
    return read_itch_capture(data).messages


def test_message_i_is_sequence_number_i_plus_one_in_one_packet_per_frame() -> None:
    messages = _messages([b"a" * 10, b"b" * 20, b"c" * 30])
    frames = CAPTURE.frames(messages, 1, 3)
    assert len(frames) == 1
    packet = moldudp64.decode_packet(frames[0])
    assert (packet.sequence, packet.message_count, packet.messages) == (2, 2, (b"b" * 20, b"c" * 30))
    assert CAPTURE.seq_of(messages, 2) == 3
    (end,) = CAPTURE.end(len(messages))
    closing = moldudp64.decode_packet(end)
    assert (closing.sequence, closing.message_count) == (4, moldudp64.END_OF_SESSION)


def test_a_frame_never_holds_more_than_a_datagram() -> None:
    big = [bytes([i]) * 30_000 for i in range(5)]
    frames = CAPTURE.frames(_messages(big), 0, 5)
    assert all(len(frame) <= moldudp64.MAX_PACKET_BYTES for frame in frames) and len(frames) == 3
    numbered = [
        (packet.sequence + i, message)
        for packet in map(moldudp64.decode_packet, frames)
        for i, message in enumerate(packet.messages)
    ]
    assert numbered == list(enumerate(big, start=1))


def test_a_generated_capture_reads_back_whole() -> None:
    capture = make_itch_capture(symbols=20, orders=100, seed=1)
    assert len(read_itch_capture(capture.data).messages) == capture.messages
    with pytest.raises(ValueError):
        read_itch_capture(b"")
    assert CAPTURE.time_of is None  # played at a rate only: --speed is refused


def test_every_format_has_its_captures_and_each_command_one_default() -> None:
    assert list(CAPTURES) == list(FORMATS)
    assert all(face.name == name for name, face in CAPTURES.items())
    assert (default_capture("source"), default_capture("book"), default_capture("overload")) == (
        "fix44",
        "fix44",
        "itch50",
    )
    assert chaos_formats() == ("fix44", "itch50")
    with pytest.raises(LookupError):
        default_capture("nothing")
    with pytest.raises(ValueError, match="one of"):
        capture_named("fix43")
