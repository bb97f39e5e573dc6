"""The C framing of a MoldUDP64 packet (``MboRun.records``) against ``proto.moldudp64``'s Python.

``Itch50Engine.source_frame`` cuts each packet into its record frame in C where the extension is
built; the reference is ``records_of(decode_packet(packet))``. Packets are laid out here by hand
from the MoldUDP64 specification (a 10-byte session, a u64 sequence number, a u16 count, then a
u16 length before each message), well-formed and hostile: a count past the messages, a length
past the end, a lone byte where a length should be, trailing bytes, the end of session, a
sequence number at the top of the u64.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.conversion import choice
from feedha.adapter.formats.itch50.engine import Itch50Engine
from feedha.proto import moldudp64

needs_native = pytest.mark.skipif(
    choice.make_order_store().run is None, reason="adapter.conversion._orders is not built"
)


def _packet(sequence: int, count: int, messages: list[bytes], tail: bytes = b"") -> bytes:
    body = b"".join(struct.pack(">H", len(message)) + message for message in messages)
    return b"SESSION123" + struct.pack(">QH", sequence, count) + body + tail


def _reference(packet: bytes) -> tuple[bytes, int, int] | None:
    try:
        decoded = moldudp64.decode_packet(packet)
    except moldudp64.PacketError:
        return None
    return moldudp64.records_of(decoded), decoded.message_count, decoded.trailing


def _native() -> object:
    return Itch50Engine(depth=2)._records


@needs_native
@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from((0, 1, 2**62, 2**64 - 3, 2**64 - 1)),
    st.integers(0, 0xFFFF) | st.sampled_from((0, 1, 2, 3, 0xFFFF)),
    st.lists(st.binary(max_size=40), max_size=5),
    st.binary(max_size=3),
    st.integers(0, 60),
)
def test_packets_are_cut_as_the_python_reference_cuts_them(
    sequence: int, count: int, messages: list[bytes], tail: bytes, cut: int
) -> None:
    records = _native()
    assert callable(records)
    packet = _packet(sequence, count, messages, tail)
    for data in (packet, packet[: len(packet) - cut], packet[:cut]):
        assert records(data) == _reference(data)


@needs_native
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_any_bytes_are_cut_as_the_python_reference_cuts_them(data: bytes) -> None:
    records = _native()
    assert callable(records)
    assert records(data) == _reference(data)


@needs_native
def test_the_engine_counts_heartbeats_ends_and_trailing_bytes_alike() -> None:
    packets = [
        _packet(5, 0, []),
        _packet(5, 0xFFFF, [], b"xy"),
        _packet(2**64 - 2, 3, [b"A" * 36, b"", b"D" * 19]),
        _packet(9, 4, [b"X" * 23], b"\x00"),
        b"short",
    ]
    engines = [Itch50Engine(depth=2, prefer_native=n) for n in (True, False)]
    assert engines[0]._records is not None and engines[1]._records is None
    frames = [[engine.source_frame(packet) for packet in packets] for engine in engines]
    assert frames[0] == frames[1]
    counted = [(e.heartbeats, e.ends_of_session, e.trailing_bytes) for e in engines]
    assert counted[0] == counted[1] == (1, 1, 2)
