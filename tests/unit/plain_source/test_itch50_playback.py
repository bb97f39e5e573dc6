"""feedha source --format itch50: BinaryFILE captures cut into MoldUDP64 packets (no sockets)."""

from __future__ import annotations

import pytest

from feedha.plain_source.config import SourceConfig
from feedha.plain_source.itch50_capture import make_itch_capture
from feedha.plain_source.itch50_playback import ItchPlayback, read_itch_capture
from feedha.proto import moldudp64


def _playback(messages: list[bytes]) -> ItchPlayback:
    data = b"".join(len(m).to_bytes(2, "big") + m for m in messages)
    return ItchPlayback(SourceConfig(streams=("A-Z",)), read_itch_capture(data), rate=1000.0)


def test_message_i_is_sequence_number_i_plus_one_in_one_packet_per_frame() -> None:
    playback = _playback([b"a" * 10, b"b" * 20, b"c" * 30])
    frames = playback._frames(1, 3)
    assert len(frames) == 1
    packet = moldudp64.decode_packet(frames[0])
    assert (packet.sequence, packet.message_count, packet.messages) == (2, 2, (b"b" * 20, b"c" * 30))
    assert playback._seq_of(2) == 3


def test_a_frame_never_holds_more_than_a_datagram() -> None:
    big = [bytes([i]) * 30_000 for i in range(5)]
    playback = _playback(big)
    frames = playback._frames(0, 5)
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
