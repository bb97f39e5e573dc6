"""The data-plane wire format: exact bytes, round trips, and rejection of bad packets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feedha.proto import wire

EXAMPLE = bytes.fromhex(
    "4648 01 00 0001 0002 00000003 000000000000000a"  # magic ver flags chan adapter term first
    "0002 0000 0000000000000005"  # count reserved send_time
    "000d 0001 0000000000000064 616263"  # block: len=13 stream=1 seq=100 "abc"
    "000a 0001 0000000000000065"  # block: len=10 stream=1 seq=101 ""
)


def example_packet() -> bytes:
    return wire.encode_packet(
        channel=1, adapter=2, term=3, first_seq=10, blocks=[(1, 100, b"abc"), (1, 101, b"")], send_time_ns=5
    )


def test_documented_example_bytes() -> None:
    assert example_packet() == EXAMPLE  # docs/wire-format.md shows these bytes


def test_header_is_32_bytes_big_endian() -> None:
    packet = example_packet()
    assert packet[:2] == b"FH" and packet[2] == 1
    assert int.from_bytes(packet[12:20], "big") == 10
    assert int.from_bytes(packet[20:22], "big") == 2
    assert wire.HEADER_SIZE == 32


def test_round_trip() -> None:
    header, blocks = wire.decode_packet(example_packet())
    assert (header.channel, header.adapter, header.term, header.first_seq, header.count) == (1, 2, 3, 10, 2)
    assert [(b.msg_seq, b.source_stream, b.source_seq, b.payload) for b in blocks] == [
        (10, 1, 100, b"abc"),
        (11, 1, 101, b""),
    ]
    assert header.next_seq == 12 and not header.is_heartbeat


def test_heartbeat_carries_next_seq() -> None:
    packet = wire.encode_packet(channel=1, adapter=1, term=1, first_seq=77, blocks=(), send_time_ns=0)
    header, blocks = wire.decode_packet(packet)
    assert header.is_heartbeat and header.first_seq == 77 and blocks == []


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda p: b"XX" + p[2:], "magic"),
        (lambda p: p[:2] + b"\x03" + p[3:], "version"),
        (lambda p: p[:2] + b"\x02" + p[3:], "sealed"),
        (lambda p: p[:3] + b"\x80" + p[4:], "flags"),
        (lambda p: p[:31], "truncated"),
        (lambda p: p[:-1], "truncated"),
        (lambda p: p + b"\x00", "length"),
        (lambda p: p[:3] + b"\x01" + p[4:], "count"),  # heartbeat flag with blocks
    ],
)
def test_bad_packets_are_rejected_with_a_reason(mutate, reason) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(wire.WireError) as info:
        wire.decode_packet(mutate(example_packet()))
    assert info.value.reason == reason


@given(st.binary(max_size=200))
def test_garbage_never_raises_anything_but_wire_error(data: bytes) -> None:
    try:
        wire.decode_packet(data)
    except wire.WireError:
        pass


@given(
    st.lists(
        st.tuples(st.integers(0, 0xFFFF), st.integers(0, 2**64 - 1), st.binary(max_size=300)), max_size=40
    )
)
def test_builder_round_trips_and_respects_its_budget(blocks: list[tuple[int, int, bytes]]) -> None:
    builder = wire.PacketBuilder(1024)
    packets = []
    for i, (stream, seq, payload) in enumerate(blocks):
        if not builder.fits(len(payload)):
            packets.append(builder.build(channel=1, adapter=1, term=1, send_time_ns=0))
        builder.add(1000 + i, stream, seq, payload)
    if builder.count:
        packets.append(builder.build(channel=1, adapter=1, term=1, send_time_ns=0))
    decoded = [b for p in packets for b in wire.decode_packet(p)[1]]
    assert [(b.msg_seq, b.source_stream, b.source_seq, b.payload) for b in decoded] == [
        (1000 + i, s, q, p) for i, (s, q, p) in enumerate(blocks)
    ]
    assert all(len(p) <= 1024 or wire.decode_packet(p)[0].count == 1 for p in packets)


def test_builder_refuses_out_of_order_blocks() -> None:
    builder = wire.PacketBuilder()
    builder.add(5, 1, 1, b"x")
    with pytest.raises(ValueError, match="does not follow"):
        builder.add(7, 1, 2, b"y")
    assert repr(builder) == "<PacketBuilder [first_seq=5, count=1, bytes=45]>"


DELAYED_EXAMPLE = bytes.fromhex(
    "4648 01 08 0001 0002 00000003 000000000000000a"  # flags 0x08: delayed
    "0002 0000 0000000000000005"
    "000d 0001 0000000000000064 616263"  # block: stream=1 seq=100 "abc"
    "0014 0000 0000000000000065"  # tombstone: len=20 stream=0 seq=101
    "0a03 49424d 1001 1a01 78"  # Tombstone{symbol IBM, purge_id 1, reason x}
)


def test_documented_delayed_example_with_a_tombstone() -> None:
    from feedha.proto import market_pb2

    tombstone = market_pb2.Tombstone(symbol="IBM", purge_id=1, reason="x").SerializeToString()
    packet = wire.encode_packet(
        channel=1,
        adapter=2,
        term=3,
        first_seq=10,
        blocks=[(1, 100, b"abc"), (wire.TOMBSTONE_STREAM, 101, tombstone)],
        send_time_ns=5,
        flags=wire.FLAG_DELAYED,
    )
    assert packet == DELAYED_EXAMPLE  # docs/wire-format.md shows these bytes
    header, blocks = wire.decode_packet(packet)
    assert header.is_delayed and not header.is_retransmission
    assert [b.is_tombstone for b in blocks] == [False, True]
    heartbeat = wire.encode_packet(
        channel=1, adapter=2, term=3, first_seq=12, blocks=(), send_time_ns=5, flags=wire.FLAG_DELAYED
    )
    assert wire.decode_header(heartbeat).flags == wire.FLAG_DELAYED | wire.FLAG_HEARTBEAT


CONFLATED_EXAMPLE = bytes.fromhex(
    "4648 01 30 0001 0002 00000003 0000000000000007"  # flags 0x30: conflated, end of interval
    "0001 0000 0000000000000005"  # one block, send time T[k] = 5
    "0015 ffff 00000000000001f4"  # len=21 stream=65535 seq=B[k]=500
    "0a03 49424d 1805 2a02 080a"  # MarketUpdate{symbol IBM, publish_time_ns 5, state{volume 10}}
)


def test_documented_conflated_example() -> None:
    from feedha.adapter.core.conflated_output import encode_state, ref
    from feedha.proto import market_pb2

    update = market_pb2.MarketUpdate(symbol="IBM")
    update.state.volume = 10
    payload = encode_state("IBM", ref(update.SerializeToString()), time_ns=5)
    packet = wire.encode_packet(
        channel=1,
        adapter=2,
        term=3,
        first_seq=7,
        blocks=[(wire.CONFLATED_STREAM, 500, payload)],
        send_time_ns=5,
        flags=wire.FLAG_CONFLATED | wire.FLAG_END_OF_INTERVAL,
    )
    assert packet == CONFLATED_EXAMPLE  # docs/wire-format.md shows these bytes
    header, _blocks = wire.decode_packet(packet)
    assert header.is_conflated and header.is_end_of_interval and not header.is_delayed
