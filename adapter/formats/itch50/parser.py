"""Parsing ``itch50``: one NASDAQ TotalView-ITCH 5.0 message -> an :class:`ItchMessage`.

Theory of operation
-------------------
A body is what the MoldUDP64 record frame gives (:mod:`proto.moldudp64`):
the message's u64 sequence number (its ``source_seq``), then the ITCH
message as the specification lays it out: a one-letter type, then for every
type the stock locate (u16), the tracking number (u16) and a 6-byte
timestamp (nanoseconds since midnight), then the type's fields. Every
integer is big-endian; prices are u32 with four implied decimals.

Every message type of the specification has one fixed length. A message
whose length is not its type's (truncated or too long), or of a type the
specification does not define, is refused whole (:class:`ConversionError`
``bad_length`` / ``unknown_type``) and changes nothing; the adapter
quarantines it at its position. The types that move books or session
values (``R A F E C X D U P Q``) are decoded; the others (``S H B`` and
the rest) are checked by their length and *skipped* (:data:`SKIPPED`:
counted, not quarantined, their position used up). Pure.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from feedha.adapter.conversion.engine import SKIPPED
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.errors import ConversionError
from feedha.proto.wire import MAX_SOURCE_SEQ

__all__ = ["ITCH_REASONS", "LENGTHS", "SKIPPED", "ItchMessage", "parse_itch"]

ITCH_REASONS: Final = frozenset(
    {
        SKIPPED,
        "bad_length",  # not the type's length (truncated or oversize)
        "unknown_type",
        "bad_value",  # a side other than B/S, a printable flag other than Y/N, an empty stock
        "unknown_order",  # a reference that is not live
        "duplicate_order",  # an add of a reference already live
        "bad_shares",  # more shares executed or cancelled than the order has
        "missing_seq",
        "bad_seq",  # a sequence number past MAX_SOURCE_SEQ
    }
)

# Message type -> its length in bytes (TotalView-ITCH 5.0, section 1).
LENGTHS: Final[dict[bytes, int]] = {
    b"S": 12, b"R": 39, b"H": 25, b"Y": 20, b"L": 26, b"V": 35, b"W": 12, b"K": 28,
    b"J": 35, b"h": 21, b"A": 36, b"F": 40, b"E": 31, b"C": 36, b"X": 23, b"D": 19,
    b"U": 35, b"P": 44, b"Q": 40, b"B": 19, b"I": 50, b"N": 20, b"O": 48,
}  # fmt: skip
_SEQ: Final = struct.Struct(">Q")
_HEAD: Final = struct.Struct(">cHH6s")  # type, stock locate, tracking number, timestamp
_R: Final = struct.Struct(">8s")  # stock (at 11)
_A: Final = struct.Struct(">QcI8sI")  # ref, side, shares, stock, price (at 11)
_E: Final = struct.Struct(">QIQ")  # ref, executed shares, match number
_C: Final = struct.Struct(">QIQcI")  # ref, executed shares, match number, printable, execution price
_X: Final = struct.Struct(">QI")  # ref, cancelled shares
_D: Final = struct.Struct(">Q")  # ref
_U: Final = struct.Struct(">QQII")  # original ref, new ref, shares, price
_P: Final = struct.Struct(">QcI8sIQ")  # ref, side, shares, stock, price, match number
_Q: Final = struct.Struct(">Q8sIQc")  # shares (8 bytes), stock, cross price, match number, cross type
_BODY_AT: Final = 11 + _SEQ.size
_SIDES: Final = {b"B": 1, b"S": 2}  # market.proto Side: buy is the bid side, sell the ask side


@dataclass(frozen=True, slots=True)
class ItchMessage(SourceMessage):
    """One decoded ``itch50`` message that moves books or session values.

    ``symbol`` is the stock (``R A F P Q``), or empty for the messages that
    name an order (``E C X D U``): the order's stock is the book's.

    Attributes:
        kind: the message type, one letter.
        ref: the order reference (``U``: the original one).
        new_ref: ``U``: the new reference.
        side: 1 bid (``B``) or 2 ask (``S``); 0 when the message has none.
        shares: the shares (added, executed, cancelled, traded, crossed).
        price: the price in 1/10,000 (``A F U P``: the order's; ``C``: the execution's; ``Q``: the cross's).
        printable: ``C``'s printable flag (``Y``).
        locate: the stock locate code.
    """

    kind: str = ""
    ref: int = 0
    new_ref: int = 0
    side: int = 0
    shares: int = 0
    price: int = 0
    printable: bool = False
    locate: int = 0


def parse_itch(body: bytes) -> ItchMessage:
    """Decode one record body (u64 sequence number, then the ITCH message).

    Raises:
        ConversionError: with one of :data:`ITCH_REASONS` (``skipped`` for a well-formed
            message that moves nothing).
    """
    if len(body) < _SEQ.size + 1:
        raise ConversionError("bad_length", f"a record of {len(body)} bytes holds no message")
    (source_seq,) = _SEQ.unpack_from(body)
    if source_seq <= 0:
        raise ConversionError("missing_seq", "sequence number 0")
    if source_seq > MAX_SOURCE_SEQ:
        raise ConversionError("bad_seq", f"sequence number {source_seq} is past {MAX_SOURCE_SEQ}")
    kind = body[8:9]
    length = LENGTHS.get(kind)
    size = len(body) - _SEQ.size
    if length is None:
        raise ConversionError("unknown_type", f"message type {kind!r} ({size} bytes)")
    if size != length:
        raise ConversionError("bad_length", f"type {kind.decode()} is {length} bytes, got {size}")
    decode = _DECODERS.get(kind)
    if decode is None:
        raise ConversionError(SKIPPED, f"type {kind.decode()} moves no book")
    _kind, locate, _tracking, stamp = _HEAD.unpack_from(body, _SEQ.size)
    return decode(source_seq, kind.decode(), locate, int.from_bytes(stamp, "big"), body)


def _stock(raw: bytes) -> str:
    symbol = raw.rstrip(b" \x00").decode("ascii", errors="replace")
    if not symbol:
        raise ConversionError("bad_value", "an empty stock field")
    return symbol


def _side(raw: bytes) -> int:
    side = _SIDES.get(raw)
    if side is None:
        raise ConversionError("bad_value", f"buy/sell indicator {raw!r} is neither B nor S")
    return side


def _directory(seq: int, kind: str, locate: int, ns: int, body: bytes) -> ItchMessage:
    (stock,) = _R.unpack_from(body, _BODY_AT)
    return ItchMessage(seq, _stock(stock), ns, (), kind=kind, locate=locate)


def _add(seq: int, kind: str, locate: int, ns: int, body: bytes) -> ItchMessage:
    ref, side, shares, stock, price = _A.unpack_from(body, _BODY_AT)
    return ItchMessage(
        seq, _stock(stock), ns, (), kind=kind, ref=ref, side=_side(side), shares=shares, price=price,
        locate=locate,
    )  # fmt: skip


def _executed(seq: int, kind: str, locate: int, ns: int, body: bytes) -> ItchMessage:
    ref, shares, _match = _E.unpack_from(body, _BODY_AT)
    return ItchMessage(seq, "", ns, (), kind=kind, ref=ref, shares=shares, locate=locate)


def _executed_at(seq: int, kind: str, locate: int, ns: int, body: bytes) -> ItchMessage:
    ref, shares, _match, printable, price = _C.unpack_from(body, _BODY_AT)
    if printable not in (b"Y", b"N"):
        raise ConversionError("bad_value", f"printable flag {printable!r} is neither Y nor N")
    return ItchMessage(
        seq, "", ns, (), kind=kind, ref=ref, shares=shares, price=price, printable=printable == b"Y",
        locate=locate,
    )  # fmt: skip


def _cancel(seq: int, kind: str, locate: int, ns: int, body: bytes) -> ItchMessage:
    ref, shares = _X.unpack_from(body, _BODY_AT)
    return ItchMessage(seq, "", ns, (), kind=kind, ref=ref, shares=shares, locate=locate)


def _delete(seq: int, kind: str, locate: int, ns: int, body: bytes) -> ItchMessage:
    (ref,) = _D.unpack_from(body, _BODY_AT)
    return ItchMessage(seq, "", ns, (), kind=kind, ref=ref, locate=locate)


def _replace(seq: int, kind: str, locate: int, ns: int, body: bytes) -> ItchMessage:
    ref, new_ref, shares, price = _U.unpack_from(body, _BODY_AT)
    return ItchMessage(
        seq, "", ns, (), kind=kind, ref=ref, new_ref=new_ref, shares=shares, price=price, locate=locate
    )


def _trade(seq: int, kind: str, locate: int, ns: int, body: bytes) -> ItchMessage:
    ref, side, shares, stock, price, _match = _P.unpack_from(body, _BODY_AT)
    side_code = _SIDES.get(side, 0)  # P's side may be blank (spec: "B" or "S"); not used for books
    return ItchMessage(
        seq, _stock(stock), ns, (), kind=kind, ref=ref, side=side_code, shares=shares, price=price,
        locate=locate,
    )  # fmt: skip


def _cross(seq: int, kind: str, locate: int, ns: int, body: bytes) -> ItchMessage:
    shares, stock, price, _match, _cross_type = _Q.unpack_from(body, _BODY_AT)
    return ItchMessage(seq, _stock(stock), ns, (), kind=kind, shares=shares, price=price, locate=locate)


_DECODERS: Final = {
    b"R": _directory, b"A": _add, b"F": _add, b"E": _executed, b"C": _executed_at,
    b"X": _cancel, b"D": _delete, b"U": _replace, b"P": _trade, b"Q": _cross,
}  # fmt: skip
