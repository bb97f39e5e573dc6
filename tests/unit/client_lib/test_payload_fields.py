"""One integer field of a payload: the C walk, its Python reference and the protobuf runtime agree.

Payloads come from two writers that are not the walk: the protobuf runtime
(``MarketUpdate.SerializeToString``) and Hypothesis, which writes fields byte
by byte from the protobuf encoding's public layout (a tag varint of field
number and wire type, then a varint, 8 or 4 bytes, or a length and bytes),
with repeated, out-of-order and unknown fields, groups, bad wire types and
fields cut short.
"""

from __future__ import annotations

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.client import _blocks  # not skipped when missing: a checkout that did not build it fails
from feedha.client._payload_fields import WHY_NOT_NATIVE, read_int64_field, read_int64_field_reference
from feedha.client.errors import ProtocolError
from feedha.client.events import Delivery
from feedha.proto import market_pb2

EVENT_TIME = 2  # MarketUpdate.event_time_ns (proto/market.proto)
INT64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, kind: int, body: bytes = b"") -> bytes:
    return _varint(number << 3 | kind) + body


def _both(packet: bytes, start: int, end: int, field: int = EVENT_TIME) -> int | None:
    native = _blocks.read_int64_field(packet, start, end, field)
    assert native == read_int64_field_reference(packet, start, end, field)
    return native


def _runtime(payload: bytes) -> int | None:
    try:
        return market_pb2.MarketUpdate.FromString(payload).event_time_ns
    except DecodeError:
        return None


def _delivery(payload: bytes, lead: bytes = b"\xff" * 7) -> Delivery:
    packet = lead + payload + b"\x08\x01"  # bytes after the payload belong to the next block
    return Delivery(1, 5, 1, 9, 0, 1, 0, packet, len(lead), len(lead) + len(payload))


def test_the_extension_is_chosen() -> None:
    assert WHY_NOT_NATIVE is None and read_int64_field is _blocks.read_int64_field


@settings(max_examples=300)
@given(
    symbol=st.text(max_size=12),
    event=INT64,
    publish=INT64,
    entries=st.lists(st.tuples(st.integers(0, 5), st.floats(allow_nan=False), INT64), max_size=4),
)
def test_what_the_runtime_writes_reads_back_as_the_runtime_reads_it(
    symbol: str, event: int, publish: int, entries: list[tuple[int, float, int]]
) -> None:
    update = market_pb2.MarketUpdate(symbol=symbol, event_time_ns=event, publish_time_ns=publish)
    for kind, price, size in entries:
        update.entries.add(type=kind, price=price, size=size)
    payload = update.SerializeToString()
    delivery = _delivery(payload)
    assert _both(delivery._packet, delivery._start, delivery._end) == event
    assert delivery.event_time_ns == event and delivery._update is None  # nothing decoded
    assert delivery.update.event_time_ns == event and delivery.event_time_ns == event


_VARINTS = st.one_of(INT64, st.integers(0, 300)).map(_varint)
_FIELDS = st.one_of(
    st.tuples(st.integers(1, 6), st.just(0), _VARINTS).map(lambda f: _field(f[0], 0, f[2])),
    st.tuples(st.integers(1, 6), st.just(1), st.binary(min_size=8, max_size=8)).map(
        lambda f: _field(f[0], 1, f[2])
    ),
    st.tuples(st.integers(1, 6), st.just(5), st.binary(min_size=4, max_size=4)).map(
        lambda f: _field(f[0], 5, f[2])
    ),
    st.tuples(st.integers(1, 6), st.just(2), st.binary(max_size=6)).map(
        lambda f: _field(f[0], 2, _varint(len(f[2])) + f[2])
    ),
    st.tuples(st.integers(0, 6), st.sampled_from([3, 4, 6, 7])).map(lambda f: _field(f[0], f[1])),
    st.binary(max_size=4),  # anything: a tag cut short, a length past the end, an eleven-byte varint
)


@settings(max_examples=500)
@given(fields=st.lists(_FIELDS, max_size=8), cut=st.integers(0, 3))
def test_bytes_written_field_by_field_read_as_the_runtime_reads_them_or_are_declined(
    fields: list[bytes], cut: int
) -> None:
    payload = b"".join(fields)
    payload = payload[: max(0, len(payload) - cut)]
    delivery = _delivery(payload)
    read = _both(delivery._packet, delivery._start, delivery._end)
    decoded = _runtime(payload)
    if decoded is not None:  # what the runtime reads, the walk reads too, or it declines and decodes
        assert read in (decoded, None)
        assert delivery.event_time_ns == decoded
    elif read is None:  # declined, and the runtime refuses it: the property names the fault
        with pytest.raises(ProtocolError):
            delivery.event_time_ns  # noqa: B018


def test_the_last_copy_of_the_field_wins_and_another_wire_type_is_not_it() -> None:
    payload = (
        _field(EVENT_TIME, 0, _varint(5))
        + _field(1, 2, b"\x03IBM")
        + _field(EVENT_TIME, 0, _varint(-7))
        + _field(EVENT_TIME, 1, b"\x01" * 8)  # field 2 as fixed64: an unknown field to the runtime
    )
    assert _both(payload, 0, len(payload)) == -7 == _runtime(payload)


def test_absent_is_zero_and_a_ten_byte_varint_is_negative() -> None:
    assert _both(b"", 0, 0) == 0 == _runtime(b"")
    assert _both(_field(1, 2, b"\x00"), 0, 2) == 0
    payload = _field(EVENT_TIME, 0, _varint(-1))
    assert len(payload) == 11 and _both(payload, 0, len(payload)) == -1 == _runtime(payload)


@pytest.mark.parametrize(
    "payload",
    [
        _field(3, 3) + _field(3, 4),  # a group: declined, not walked
        _field(EVENT_TIME, 0, b"\x80" * 10 + b"\x01"),  # an eleven-byte varint
        _field(EVENT_TIME, 0, b"\x80"),  # cut inside the varint
        _field(1, 2, b"\x05IB"),  # a length past the end
        _field(1, 1, b"\x00" * 7),  # fixed64 cut short
        b"\x02\x01",  # field number 0
        b"\x80\x80\x80\x80\x10",  # a tag beyond 32 bits
        b"\x80\x80\x80\x80\x80\x01",  # a tag longer than five bytes
    ],
)
def test_what_is_not_plain_is_declined(payload: bytes) -> None:
    assert _both(payload, 0, len(payload)) is None


def test_the_walk_stays_inside_its_bounds() -> None:
    packet = _field(EVENT_TIME, 0, _varint(300))
    assert _both(packet, 0, len(packet)) == 300
    assert _both(packet, 0, len(packet) - 1) is None  # the varint runs past end, not into the packet
    for start, end in ((-1, 2), (2, 1), (0, len(packet) + 1)):
        assert _both(packet, start, end) is None
    assert _blocks.read_int64_field(packet, 0, 1 << 80, EVENT_TIME) is None
    assert _both(bytearray(packet), 0, 3) is None  # not bytes: decoded whole by the caller
    with pytest.raises(TypeError):
        _blocks.read_int64_field(packet, 0, 3)


def test_a_packet_in_another_buffer_is_decoded_whole() -> None:
    payload = market_pb2.MarketUpdate(symbol="IBM", event_time_ns=42).SerializeToString()
    delivery = Delivery(1, 5, 1, 9, 0, 1, 0, memoryview(b"\0" + payload), 1, 1 + len(payload))  # type: ignore[arg-type]
    assert delivery.event_time_ns == 42 and delivery._update is not None


def test_a_malformed_payload_raises_as_update_does() -> None:
    delivery = _delivery(_field(1, 2, b"\x09IBM"))  # the symbol's length runs past the payload
    with pytest.raises(ProtocolError):
        delivery.event_time_ns  # noqa: B018
