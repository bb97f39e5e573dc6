"""The client's live block walk: the C extension against its Python reference, packet for packet.

Packets are written here from the public layout (a 32-byte packet header, then
blocks of ``>HHQ`` -- length, source_stream, source_seq -- and a payload), not
by ``feedha.proto.wire``'s builder: well formed ones, and ones cut short, with
a bad length, a tombstone or bytes left over, which both walks must decline.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.client import _blocks  # not skipped when missing: a checkout that did not build it fails
from feedha.client._live_blocks import WHY_NOT_NATIVE, Stamp, read_live_blocks, read_live_blocks_reference
from feedha.client.events import Delivery
from feedha.proto import wire

BLOCK = struct.Struct(">HHQ")
STAMP: Stamp = (Delivery, 7, 2, 3, 1_700_000_000_000_000_000)
FIELDS = list(Delivery.__slots__)


def _packet(blocks: list[tuple[int, int, bytes]], *, length_delta: int = 0) -> bytes:
    """A packet header's room (its bytes are not read here), then each (stream, source_seq, payload)."""
    body = b"".join(
        BLOCK.pack(max(0, 10 + len(payload) + length_delta), stream, seq) + payload
        for stream, seq, payload in blocks
    )
    return bytes(range(32)) + body


def _plain(result: Any) -> Any:
    """A walk's result with each delivery as its slots' values (``None`` stays ``None``)."""
    if result is None:
        return None
    streams, source_seqs, deliveries = result
    return streams, source_seqs, [(type(d), *(getattr(d, name) for name in FIELDS)) for d in deliveries]


def _both(packet: bytes, next_seq: int, first: int, count: int, below: int, stamp: Stamp = STAMP) -> Any:
    native = _blocks.read_live_blocks(packet, next_seq, first, count, below, stamp)
    reference = read_live_blocks_reference(packet, next_seq, first, count, below, stamp)
    assert _plain(native) == _plain(reference)
    return native


def test_the_extension_is_chosen_and_agrees_with_the_wire_layout() -> None:
    assert WHY_NOT_NATIVE is None and read_live_blocks is _blocks.read_live_blocks
    assert _blocks.HEADER_SIZE == wire.HEADER_SIZE and _blocks.BLOCK_OVERHEAD == wire.BLOCK_HEADER.size
    assert _blocks.TOMBSTONE_STREAM == wire.TOMBSTONE_STREAM


def test_copies_then_new_blocks_become_deliveries_that_point_into_the_packet() -> None:
    packet = _packet([(1, 100 + i, bytes([i]) * (i + 1)) for i in range(5)])
    streams, source_seqs, deliveries = _both(packet, 12, 10, 5, 2)
    assert streams == [1] * 5 and source_seqs == [100, 101, 102, 103, 104]
    assert [d.msg_seq for d in deliveries] == [12, 13, 14]
    third = deliveries[0]
    assert packet[third._start : third._end] == bytes([2]) * 3
    assert (third.channel, third.line, third.term, third.send_time_ns) == STAMP[1:]
    assert third._update is None  # decoded only when asked for; stored, as __init__ stores it


@pytest.mark.parametrize(
    "packet, why",
    [
        (_packet([(1, 1, b"ab"), (1, 2, b"cd")])[:-1], "the last block runs past the end"),
        (_packet([(1, 1, b"ab"), (1, 2, b"cd")]) + b"x", "a byte left after the last block"),
        (_packet([(1, 1, b"ab"), (0, 2, b"cd")]), "a tombstone among the new blocks"),
        (_packet([(1, 1, b"")], length_delta=-1), "a length shorter than stream and seq"),
        (_packet([(1, 1, b"ab")])[:40], "a block header cut short"),
        (bytes(20), "a packet shorter than its header"),
    ],
)
def test_a_packet_the_general_path_must_name_is_declined(packet: bytes, why: str) -> None:
    assert _both(packet, 1, 1, 2, 0) is None, why


def test_a_tombstone_among_the_copies_is_read_and_numbers_beyond_64_bits_are_declined() -> None:
    packet = _packet([(0, 1, b"ab"), (1, 2, b"cd")])
    assert _both(packet, 2, 1, 2, 1) is not None  # a copy's stream is only compared, never delivered
    assert _blocks.read_live_blocks(packet, 2**64, 2**64, 2, 0, STAMP) is None
    assert _blocks.read_live_blocks(packet, 2**64 - 1, 2**64 - 1, 2, 0, STAMP) is None  # first + count wraps
    # A count far beyond the packet's blocks ends at the packet's end, not after `count` turns.
    assert _both(packet, 1, 1, 2**40, 2**40) is None and _both(packet, 1, 1, 2**40, 0) is None


def test_a_kind_without_the_delivery_slots_of_its_own_is_refused() -> None:
    class Loose:
        pass

    class Other:
        __slots__ = ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l")

    class Borrowed(Delivery):  # another class's slot under a Delivery name: another layout's offset
        __slots__ = ()
        channel = Other.l  # type: ignore[assignment]

    packet = _packet([(1, 1, b"ab")])
    for kind in (Loose, Borrowed):
        with pytest.raises(TypeError, match="slot"):
            _blocks.read_live_blocks(packet, 1, 1, 1, 0, (kind, 7, 2, 3, 4))
    with pytest.raises(TypeError):
        _blocks.read_live_blocks(bytearray(packet), 1, 1, 1, 0, STAMP)
    with pytest.raises(TypeError):
        _blocks.read_live_blocks(packet, 1, 1, 1, 0, (Delivery, 7))


def test_a_subclass_of_delivery_is_built_as_itself() -> None:
    class Tagged(Delivery):
        __slots__ = ("tag",)

    packet = _packet([(1, 5, b"ab")])
    (delivery,) = _both(packet, 3, 3, 1, 0, (Tagged, 7, 2, 3, 4))[2]
    assert type(delivery) is Tagged and delivery.source_seq == 5 and not hasattr(delivery, "tag")


_block = st.tuples(st.sampled_from([0, 1, 2, 65535]), st.integers(0, 2**64 - 1), st.binary(max_size=24))


@settings(max_examples=400, deadline=None)
@given(
    blocks=st.lists(_block, max_size=12),
    first=st.integers(0, 2**64 - 1),
    below_share=st.floats(0, 1),
    cut=st.integers(-3, 3),
    length_delta=st.sampled_from([0, 0, 0, -1, 1, -11]),
)
def test_the_extension_returns_what_the_reference_returns(
    blocks: list[tuple[int, int, bytes]], first: int, below_share: float, cut: int, length_delta: int
) -> None:
    packet = _packet(blocks, length_delta=length_delta)
    packet = packet[:cut] if cut < 0 else packet + bytes(cut)
    count = len(blocks)
    below = round(count * below_share)
    if first + count >= 2**64:  # the header's first msg_seq is 64 bits; the walk declines beyond
        assert _blocks.read_live_blocks(packet, first + below, first, count, below, STAMP) is None
        return
    _both(packet, first + below, first, count, below)
