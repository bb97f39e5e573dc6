"""itch50: the parser against messages laid out by hand from the ITCH 5.0 specification.

Every message here is written field by field with ``struct.pack_into`` at the
offsets the specification gives (section 1.x of "Nasdaq TotalView-ITCH 5.0"),
not by any encoder of ours, so the parser is checked against the document.
"""

from __future__ import annotations

import struct

import pytest

from feedha.adapter.errors import ConversionError
from feedha.adapter.formats.itch50.parser import LENGTHS, ItchMessage, parse_itch

TIME_NS = 34_200_000_000_123  # 09:30:00.000000123 after midnight


def _message(kind: bytes, length: int, locate: int = 42, tracking: int = 7) -> bytearray:
    """The common header: type @0, stock locate @1 (2), tracking number @3 (2), timestamp @5 (6)."""
    buf = bytearray(length)
    buf[0:1] = kind
    struct.pack_into(">H", buf, 1, locate)
    struct.pack_into(">H", buf, 3, tracking)
    buf[5:11] = TIME_NS.to_bytes(6, "big")
    return buf


def _record(seq: int, message: bytes) -> bytes:
    return struct.pack(">Q", seq) + bytes(message)


def add_order(ref: int, side: bytes, shares: int, stock: bytes, price: int, *, mpid: bool = False) -> bytes:
    buf = _message(b"F" if mpid else b"A", 40 if mpid else 36)
    struct.pack_into(">Q", buf, 11, ref)  # Order Reference Number, offset 11, 8 bytes
    buf[19:20] = side  # Buy/Sell Indicator, offset 19
    struct.pack_into(">I", buf, 20, shares)  # Shares, offset 20
    buf[24:32] = stock.ljust(8)  # Stock, offset 24, alpha 8
    struct.pack_into(">I", buf, 32, price)  # Price, offset 32, Price(4)
    if mpid:
        buf[36:40] = b"MPID"  # Attribution, offset 36
    return bytes(buf)


def executed(ref: int, shares: int, match: int = 99) -> bytes:
    buf = _message(b"E", 31)
    struct.pack_into(">Q", buf, 11, ref)
    struct.pack_into(">I", buf, 19, shares)  # Executed Shares, offset 19
    struct.pack_into(">Q", buf, 23, match)  # Match Number, offset 23
    return bytes(buf)


def executed_with_price(ref: int, shares: int, printable: bytes, price: int) -> bytes:
    buf = _message(b"C", 36)
    struct.pack_into(">Q", buf, 11, ref)
    struct.pack_into(">I", buf, 19, shares)
    struct.pack_into(">Q", buf, 23, 5)
    buf[31:32] = printable  # Printable, offset 31
    struct.pack_into(">I", buf, 32, price)  # Execution Price, offset 32
    return bytes(buf)


def cancel(ref: int, shares: int) -> bytes:
    buf = _message(b"X", 23)
    struct.pack_into(">Q", buf, 11, ref)
    struct.pack_into(">I", buf, 19, shares)  # Cancelled Shares, offset 19
    return bytes(buf)


def delete(ref: int) -> bytes:
    buf = _message(b"D", 19)
    struct.pack_into(">Q", buf, 11, ref)
    return bytes(buf)


def replace(ref: int, new_ref: int, shares: int, price: int) -> bytes:
    buf = _message(b"U", 35)
    struct.pack_into(">Q", buf, 11, ref)  # Original Order Reference Number, offset 11
    struct.pack_into(">Q", buf, 19, new_ref)  # New Order Reference Number, offset 19
    struct.pack_into(">I", buf, 27, shares)  # Shares, offset 27
    struct.pack_into(">I", buf, 31, price)  # Price, offset 31
    return bytes(buf)


def trade(ref: int, side: bytes, shares: int, stock: bytes, price: int) -> bytes:
    buf = _message(b"P", 44)
    struct.pack_into(">Q", buf, 11, ref)
    buf[19:20] = side
    struct.pack_into(">I", buf, 20, shares)
    buf[24:32] = stock.ljust(8)
    struct.pack_into(">I", buf, 32, price)
    struct.pack_into(">Q", buf, 36, 1234)  # Match Number, offset 36
    return bytes(buf)


def cross(shares: int, stock: bytes, price: int) -> bytes:
    buf = _message(b"Q", 40)
    struct.pack_into(">Q", buf, 11, shares)  # Shares, offset 11, 8 bytes
    buf[19:27] = stock.ljust(8)  # Stock, offset 19
    struct.pack_into(">I", buf, 27, price)  # Cross Price, offset 27
    struct.pack_into(">Q", buf, 31, 77)  # Match Number, offset 31
    buf[39:40] = b"O"  # Cross Type, offset 39
    return bytes(buf)


def directory(stock: bytes, locate: int = 42) -> bytes:
    buf = _message(b"R", 39, locate=locate)
    buf[11:19] = stock.ljust(8)  # Stock, offset 11
    buf[19:20] = b"Q"  # Market Category
    buf[20:21] = b"N"  # Financial Status Indicator
    struct.pack_into(">I", buf, 21, 100)  # Round Lot Size
    buf[25:39] = b"NCZ N N1NNN\x00\x00\x00\x00N"[:14]
    return bytes(buf)


def system_event(code: bytes = b"O") -> bytes:
    buf = _message(b"S", 12, locate=0)
    buf[11:12] = code
    return bytes(buf)


def trading_action(stock: bytes) -> bytes:
    buf = _message(b"H", 25)
    buf[11:19] = stock.ljust(8)
    buf[19:20] = b"T"  # Trading State
    buf[21:25] = b"    "  # Reason
    return bytes(buf)


def broken_trade(match: int) -> bytes:
    buf = _message(b"B", 19)
    struct.pack_into(">Q", buf, 11, match)
    return bytes(buf)


def test_add_order_fields_at_the_specified_offsets() -> None:
    msg = parse_itch(_record(5, add_order(0x0102030405060708, b"B", 300, b"AAPL", 1_502_500)))
    assert isinstance(msg, ItchMessage)
    assert (msg.source_seq, msg.kind, msg.symbol, msg.locate) == (5, "A", "AAPL", 42)
    assert (msg.ref, msg.side, msg.shares, msg.price) == (0x0102030405060708, 1, 300, 1_502_500)
    assert msg.event_time_ns == TIME_NS
    mpid = parse_itch(_record(6, add_order(9, b"S", 1, b"ZVZZT", 10_000, mpid=True)))
    assert (mpid.kind, mpid.side, mpid.symbol) == ("F", 2, "ZVZZT")


def test_order_messages_decode_every_field_they_use() -> None:
    e = parse_itch(_record(1, executed(11, 25)))
    assert (e.kind, e.ref, e.shares, e.symbol) == ("E", 11, 25, "")
    c = parse_itch(_record(2, executed_with_price(11, 5, b"N", 1_499_900)))
    assert (c.kind, c.ref, c.shares, c.price, c.printable) == ("C", 11, 5, 1_499_900, False)
    assert parse_itch(_record(3, executed_with_price(11, 5, b"Y", 1))).printable
    x = parse_itch(_record(4, cancel(12, 3)))
    assert (x.kind, x.ref, x.shares) == ("X", 12, 3)
    assert parse_itch(_record(5, delete(13))).ref == 13
    u = parse_itch(_record(6, replace(14, 15, 60, 2_000_000)))
    assert (u.kind, u.ref, u.new_ref, u.shares, u.price) == ("U", 14, 15, 60, 2_000_000)


def test_trades_crosses_and_the_directory() -> None:
    p = parse_itch(_record(1, trade(0, b"B", 100, b"MSFT", 3_000_100)))
    assert (p.kind, p.symbol, p.shares, p.price) == ("P", "MSFT", 100, 3_000_100)
    q = parse_itch(_record(2, cross(5_000_000_000, b"MSFT", 3_000_000)))  # 8-byte shares
    assert (q.kind, q.symbol, q.shares, q.price) == ("Q", "MSFT", 5_000_000_000, 3_000_000)
    r = parse_itch(_record(3, directory(b"BRK A", locate=7)))
    assert (r.kind, r.symbol, r.locate) == ("R", "BRK A", 7)  # padding stripped, inner space kept


@pytest.mark.parametrize("message", [system_event(), trading_action(b"AAPL"), broken_trade(1234)])
def test_types_that_move_no_book_are_skipped_not_quarantined(message: bytes) -> None:
    with pytest.raises(ConversionError) as caught:
        parse_itch(_record(9, message))
    assert caught.value.reason == "skipped"


def test_every_other_specified_type_is_checked_by_its_length_and_skipped() -> None:
    for kind, length in LENGTHS.items():
        if kind in b"RAFECXDUPQ":
            continue
        with pytest.raises(ConversionError) as caught:
            parse_itch(_record(1, bytes(_message(kind, length))))
        assert caught.value.reason == "skipped", kind


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (add_order(1, b"B", 1, b"A", 1)[:-1], "bad_length"),  # truncated
        (add_order(1, b"B", 1, b"A", 1) + b"\x00", "bad_length"),  # oversize
        (system_event()[:5], "bad_length"),
        (b"Z" + bytes(30), "unknown_type"),
        (add_order(1, b"Z", 1, b"A", 1), "bad_value"),  # side neither B nor S
        (add_order(1, b"B", 1, b"", 1), "bad_value"),  # an empty stock
        (executed_with_price(1, 1, b"?", 1), "bad_value"),
    ],
)
def test_bad_messages_are_refused_whole(message: bytes, reason: str) -> None:
    with pytest.raises(ConversionError) as caught:
        parse_itch(_record(3, message))
    assert caught.value.reason == reason


def test_a_record_without_a_message_or_sequence_is_refused() -> None:
    with pytest.raises(ConversionError):
        parse_itch(b"\x00" * 8)
    with pytest.raises(ConversionError) as caught:
        parse_itch(_record(0, delete(1)))
    assert caught.value.reason == "missing_seq"
