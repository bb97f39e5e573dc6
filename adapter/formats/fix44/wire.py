"""The ``fix44`` block's payload written directly: a ``MarketUpdate`` of ``SymbolUpdate`` values.

The bytes are exactly what the protobuf runtime writes for the same message
with deterministic serialization (fields in number order, proto3 zeros left
out, a double zero by its bits) -- docs/wire-format.md, "Order books";
``tests/unit/adapter/test_fix44_wire.py`` compares the two on generated books.
Writing them here rather than through the runtime lets a book side that did
not change reuse its bytes (:func:`~adapter.conversion.book.side_bytes`), so
the cost of a block follows what the message changed, not the size of the
books.

A block shows the best ``depth`` levels of each side (``SymbolState.book``);
a price-keyed book keeps more, so each symbol also carries the prices the
message named as it left them (:func:`price_levels`: ``SymbolUpdate.levels``,
``book_replaced``), from which a reader that holds the book before the
message -- the journal's recovery, :func:`~adapter.conversion.codec.roll_symbol`
-- keeps the whole book. So a block's size follows the message, never the
book (a book of thousands of prices no longer makes every block oversize).
Pure.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from feedha.adapter.conversion.book import (
    ASK,
    BID,
    BookChange,
    BookValues,
    Level,
    book_changes,
    find_price,
    side_bytes,
    varint,
)
from feedha.adapter.conversion.messages import BookEntry, SourceMessage
from feedha.adapter.conversion.state import SymbolValues
from feedha.proto.model import SESSION_VALUES

__all__ = ["encode_block", "encode_symbol", "price_levels", "shown_changes"]

_D: Final = struct.Struct("<d").pack
_ZERO: Final = bytes(8)
_WIRE: Final = 1
_OPTIONAL_TAGS: Final = tuple(bytes(((number << 3) | 1,)) for number in range(1, 10))


def _double(tag: bytes, value: float) -> bytes:
    packed = _D(value)
    return b"" if packed == _ZERO else tag + packed


def _int(tag: bytes, value: int) -> bytes:
    return tag + varint(value) if value else b""


def _field(tag: bytes, body: bytes) -> bytes:
    return tag + varint(len(body)) + body


def _change(change: BookChange) -> bytes:
    return _field(
        b"\x1a",
        _int(b"\x08", change.action)
        + _int(b"\x10", change.side)
        + _int(b"\x18", change.level)
        + _double(b"\x21", change.price)
        + _double(b"\x29", change.size)
        + _int(b"\x30", change.orders),
    )


def _trade(price: float, size: float) -> bytes:
    # Entry {type 1 = TRADE (3), price 2, size 3 int64, notional 4}
    return _field(
        b"\x12",
        b"\x08\x03" + _double(b"\x11", price) + _int(b"\x18", int(size)) + _double(b"\x21", price * size),
    )


def _state(values: SymbolValues, book: BookValues, depth: int) -> bytes:
    """``SymbolState`` with its ``Book`` (the best ``depth`` levels a side) and ``SessionValues``."""
    fixed = (
        _int(b"\x08", values.volume)
        + _double(b"\x11", values.high)
        + _double(b"\x19", values.low)
        + _double(b"\x21", values.last)
        + _double(b"\x29", values.vwap)
        + _int(b"\x30", values.trade_count)
        + _double(b"\x39", values.bid)
        + _double(b"\x41", values.ask)
        + _double(b"\x49", values.notional)
    )
    book_body = (
        (b"\x08\x01" if book.level_indexed else b"")
        + _int(b"\x10", depth)
        + side_bytes(book, BID, _WIRE, depth)
        + side_bytes(book, ASK, _WIRE, depth)
    )
    session = b"".join(
        [
            tag + _D(value)
            for tag, value in zip(
                _OPTIONAL_TAGS, [getattr(book, name) for name in SESSION_VALUES], strict=True
            )
            if value is not None
        ]
    )
    session += _double(b"\x51", book.notional) + _double(b"\x59", book.traded) + _int(b"\x60", book.trades)
    return fixed + _field(b"\x52", book_body) + _field(b"\x5a", session)


def encode_symbol(
    symbol: str,
    trades: Iterable[tuple[float, float]],
    changes: Iterable[BookChange],
    values: SymbolValues,
    depth: int,
    levels: bytes = b"",
) -> bytes:
    """One ``SymbolUpdate`` (as ``MarketUpdate`` field 8); ``levels``: :func:`price_levels`' bytes."""
    name = symbol.encode()
    body = _field(b"\x0a", name) if name else b""
    body += b"".join([_trade(price, size) for price, size in trades])
    body += b"".join([_change(change) for change in changes])
    body += _field(b"\x22", _state(values, values.book or BookValues(), depth))
    return _field(b"\x42", body + levels)


def price_levels(
    before: BookValues | None, after: BookValues, entries: Sequence[BookEntry], full: bool
) -> bytes:
    """``SymbolUpdate.levels`` and ``book_replaced`` of one symbol, as wire bytes (fields 6 and 7).

    A level-indexed book has none (a block shows all of it). A price-keyed book that was
    price-keyed before and took incremental price-keyed entries only carries the prices its
    bid and offer entries named, each once, bids then asks, best first, as the book now has
    them (``deleted`` when gone; a deleted price is written as its first entry named it).
    Otherwise -- a full refresh, a new book, one that was level-indexed or an entry with
    ``1023`` in the message -- the book was rebuilt: ``book_replaced`` and every price it holds.
    """
    if after.level_indexed:
        return b""
    rebuilt = (
        full
        or before is None
        or before.level_indexed
        or any(entry.level is not None for entry in entries if entry.entry_type in ("0", "1"))
    )
    if rebuilt:
        out = [_price_level(BID, level) for level in after.bids] + [
            _price_level(ASK, level) for level in after.asks
        ]
        return b"".join(out) + b"\x38\x01"
    named: tuple[dict[float, float], dict[float, float]] = ({}, {})
    for entry in entries:
        if entry.entry_type in ("0", "1") and entry.price is not None:
            named[entry.entry_type == "1"].setdefault(entry.price, entry.price)
    out = []
    for side, prices, levels in ((BID, named[0], after.bids), (ASK, named[1], after.asks)):
        for price in sorted(prices.values(), reverse=side == BID):
            index, present = find_price(levels, price, is_bid=side == BID)
            out.append(_price_level(side, levels[index]) if present else _price_level(side, None, price))
    return b"".join(out)


def _price_level(side: int, level: Level | None, deleted: float = 0.0) -> bytes:
    # PriceLevel {side 1, price 2, size 3, orders 4, deleted 5}
    if level is None:
        return _field(b"\x32", b"\x08" + varint(side) + _double(b"\x11", deleted) + b"\x28\x01")
    price, size, orders = level
    return _field(
        b"\x32",
        b"\x08" + varint(side) + _double(b"\x11", price) + _double(b"\x19", size) + _int(b"\x20", orders),
    )


def encode_block(
    msg: SourceMessage,
    symbols: Mapping[str, tuple[list[tuple[float, float]], list[BookChange], SymbolValues, bytes]],
    depth: int,
    publish_time_ns: int,
) -> bytes:
    """The ``MarketUpdate`` of one message: ``symbols`` in the order the message names them."""
    head = _int(b"\x10", msg.event_time_ns) + _int(b"\x18", publish_time_ns)
    return head + b"".join(
        [
            encode_symbol(symbol, *symbols[symbol][:3], depth, symbols[symbol][3])
            for symbol, _entries in msg.updates
        ]
    )


def shown_changes(before: BookValues | None, after: BookValues, depth: int) -> list[BookChange]:
    """The shown book's changes from ``before`` to ``after``, bids then asks (unchanged sides: none)."""
    old = before if before is not None else BookValues()
    out: list[BookChange] = []
    for side, old_levels, new_levels in ((BID, old.bids, after.bids), (ASK, old.asks, after.asks)):
        if old_levels is not new_levels:  # a side shared with the state since the copy did not change
            out += book_changes(old_levels[:depth], new_levels[:depth], side)
    return out
