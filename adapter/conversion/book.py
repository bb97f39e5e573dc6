"""Order books and session values: the ``fix44`` conversion state of one symbol (docs/converters.md).

Theory of operation
-------------------
A symbol's :class:`BookValues` is a market-by-price book (two sides of
``(price, size, orders)`` levels, best first) and the session values
(volume, last, high, low, open, close, settle, open interest, VWAP). A
value never set is ``None``.

A book is *level-indexed* while its entries carry ``1023`` MDPriceLevel
(New inserts at level n and shifts deeper levels down, Change replaces level
n, Delete removes level n and shifts up; nothing is kept past the depth, so a
level pushed off does not come back) and *price-keyed* while they do not
(New and Change set the size at a price, Delete removes the price; every
price is kept, up to :data:`MAX_PRICES` a side, and the best ``depth`` are
shown). An entry of the other kind switches the book's mode.

A side here is a list, best first: this is the reference, and a message
copies the sides it changes anyway (its staged copy is what a quarantine
throws away), so a new price's insertion moves at most :data:`MAX_PRICES`
references at C speed on top of that copy. The native state keeps each side
past 64 levels in a balanced tree instead (``_orders.BookTable``,
``_level_tree.h``: O(log n) a price, and a run of new best prices never moves
a whole side), and the C run applies a message in place with an undo log, no copy;
the Python path reads such a side in place (``_orders.SideView``) and stages a
message over it without a copy (:class:`~adapter.conversion.staged_side.StagedSide`,
a list to these rules), so it too pays for the levels a message touches, not the book.

Prices and sizes are the doubles nearest the decimal text, so ``101.5``,
``101.50`` and ``101.5000`` are one price, and the digest (over the exact
bits) is the same in every process. :func:`apply_entries` changes a copy the
caller owns and raises :class:`~adapter.errors.ConversionError` on what
cannot be applied; the caller commits the copy only when the whole message
applied. Pure.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple, cast

from feedha.adapter.conversion.messages import BookEntry
from feedha.adapter.conversion.order_table import order_hash
from feedha.adapter.conversion.staged_side import StagedSide
from feedha.adapter.errors import ConversionError
from feedha.proto.model import SESSION_VALUES

__all__ = [
    "MAX_PRICES",
    "BookChange",
    "BookValues",
    "MboBookValues",
    "Level",
    "apply_entries",
    "book_changes",
    "find_price",
    "side_bytes",
    "side_hash",
    "varint",
]

Level = tuple[float, float, int]  # price, size, orders
MAX_PRICES: Final = 5000  # prices kept per side of a price-keyed book (more: the message is quarantined)
NEW, CHANGE, DELETE = 0, 1, 2
INSERTED, CHANGED, DELETED = 1, 2, 3  # market.proto BookAction values
BID, ASK = 1, 2  # market.proto Side values
_PACK_NUMBER: Final = struct.Struct(">d").pack
_PACK_NUMBER_LE: Final = struct.Struct("<d").pack
_MASK: Final = (1 << 64) - 1


class BookChange(NamedTuple):
    """One change of the shown book (``market.proto`` ``BookChange``); levels count from 1."""

    action: int
    side: int
    level: int
    price: float
    size: float
    orders: int


@dataclass(slots=True)
class BookValues:
    """One symbol's book and session values (see the module docstring)."""

    level_indexed: bool = False
    bids: list[Level] = field(default_factory=list)
    asks: list[Level] = field(default_factory=list)
    volume: float | None = None
    last: float | None = None
    high: float | None = None
    low: float | None = None
    open: float | None = None
    close: float | None = None
    settle: float | None = None
    open_interest: float | None = None
    vwap: float | None = None
    notional: float = 0.0  # sum of price * size of incremental trades
    traded: float = 0.0  # sum of their sizes (VWAP's denominator)
    trades: int = 0
    # Copy-on-write: bit 1 (bids) / 2 (asks) set while the side's list is shared with a copy.
    shared: int = field(default=0, repr=False, compare=False)
    # Per side, what :func:`side_bytes` derived from it: (the list it was derived from, its limit, bytes).
    cache: dict[tuple[int, int], tuple[list[Level], int | None, bytes]] = field(
        default_factory=dict, repr=False, compare=False
    )
    # Per side, each level's wire bytes (levels are immutable: always valid; only the side's levels).
    level_bytes: dict[int, dict[Level, bytes]] = field(default_factory=dict, repr=False, compare=False)

    def copy(self) -> BookValues:
        """An independent copy (levels are immutable tuples; the lists are copied, nothing cached).

        The caller may change the copy's lists in place: nothing derived from them is carried over.
        """
        copied = BookValues(self.level_indexed, list(self.bids), list(self.asks))
        for name in SESSION_VALUES:
            setattr(copied, name, getattr(self, name))
        copied.notional, copied.traded, copied.trades = self.notional, self.traded, self.trades
        return copied

    def fork(self) -> BookValues:
        """A copy that shares the level lists until either side writes (copy on write).

        Only for the engine's staging: both must change their levels through :meth:`writable`.
        """
        forked = BookValues(
            self.level_indexed, self.bids, self.asks, *[getattr(self, n) for n in SESSION_VALUES]
        )
        forked.notional, forked.traded, forked.trades = self.notional, self.traded, self.trades
        self.shared = forked.shared = 3
        forked.cache = dict(self.cache)
        forked.level_bytes = self.level_bytes  # a level's bytes are the level's alone: right for both
        return forked

    def writable(self, side: int) -> list[Level]:
        """A side's levels to change in place (copied first while shared); its cached bytes are dropped.

        Every change of a side's levels in place goes through here (or assigns a new list).
        """
        bit = 1 if side == BID else 2
        levels = self.bids if side == BID else self.asks
        if self.shared & bit:  # a list is copied; a side kept in C is staged over (O(log n) a change)
            levels = list(levels) if isinstance(levels, list) else cast(list[Level], StagedSide(levels))
            if side == BID:
                self.bids = levels
            else:
                self.asks = levels
            self.shared &= ~bit
        self.cache.pop((side, _DIGEST), None)
        self.cache.pop((side, _WIRE), None)
        return levels

    def digest_bytes(self) -> bytes:
        """A canonical packing of everything (the state's digest hashes it with the symbol).

        Each side is its level count and :func:`side_hash`, so what is hashed per message does
        not grow with the book.
        """
        parts = [
            b"L" if self.level_indexed else b"P",
            len(self.bids).to_bytes(4, "big"),
            side_bytes(self, BID, _DIGEST),
            len(self.asks).to_bytes(4, "big"),
            side_bytes(self, ASK, _DIGEST),
        ]
        for name in SESSION_VALUES:
            value = getattr(self, name)
            parts.append(b"-" if value is None else b"+" + _PACK_NUMBER(value))
        parts.append(struct.pack(">ddq", self.notional, self.traded, self.trades))
        return b"".join(parts)

    def best(self, side: int) -> float:
        """The best price of a side (0.0 when empty)."""
        levels = self.bids if side == BID else self.asks
        return levels[0][0] if levels else 0.0


_DIGEST, _WIRE = 0, 1  # what side_bytes derives: the digest's packing, the wire's BookLevel fields
_ZERO: Final = bytes(8)


@dataclass(slots=True)
class MboBookValues(BookValues):
    """A book as a snapshot carries it: the levels, the session values and the live orders.

    ``orders`` packs each live order as :data:`~adapter.conversion.order_table.ORDER_RECORD`.
    """

    orders: bytes = b""

    def copy(self) -> MboBookValues:
        """An independent copy, orders included."""
        plain = BookValues.copy(self)
        copied = MboBookValues(plain.level_indexed, plain.bids, plain.asks, orders=self.orders)
        for name in SESSION_VALUES:
            setattr(copied, name, getattr(plain, name))
        copied.notional, copied.traded, copied.trades = plain.notional, plain.traded, plain.trades
        return copied


def side_bytes(book: BookValues, side: int, kind: int, limit: int | None = None) -> bytes:
    """One side for the digest (``kind`` 0: its :func:`side_hash`, 8 bytes) or as ``Book`` fields 3/4 (1).

    ``limit``: the wire's packing holds at most that many levels, the best (a block shows
    the best ``depth``); the digest's hash covers every level.

    Cached per side until the side changes (:meth:`BookValues.writable` or a new list), so a
    message that touches one side of one book packs that side only; the wire's per-level
    bytes are kept for the levels the side still shows, so a changed side packs its new levels only.
    """
    levels = book.bids if side == BID else book.asks
    cached = book.cache.get((side, kind))
    if kind == _DIGEST:
        limit = int(book.level_indexed)  # the hash counts positions in a level-indexed book
    if cached is not None and cached[0] is levels and cached[1] == limit:
        return cached[2]
    if kind == _DIGEST:
        packed = side_hash(levels, side, level_indexed=book.level_indexed).to_bytes(8, "big")
    else:
        shown = levels if limit is None else levels[:limit]
        tag = b"\x1a" if side == BID else b"\x22"
        known = book.level_bytes.get(side, {})
        # A zero price or size is never looked up: 0.0 == -0.0 as keys, but they encode apart.
        parts = [
            (known.get(level) if level[0] and level[1] else None) or _wire_level(tag, level)
            for level in shown
        ]
        book.level_bytes[side] = dict(zip(shown, parts, strict=True))
        packed = b"".join(parts)
    book.cache[(side, kind)] = (levels, limit, packed)
    return packed


def side_hash(levels: Sequence[Level], side: int, *, level_indexed: bool) -> int:
    """A side's share of the digest: the sum mod 2**64 of a u64 mix of each level.

    The mix is :func:`~adapter.conversion.order_table.order_hash` over (index, orders, side,
    the price's bits, the size's bits), the index counted from 1 in a level-indexed book
    (positions matter) and 0 in a price-keyed one (prices order the levels). A sum, so a
    message that changes a few levels could update it in O(changes); the C twin is
    ``_orders.c`` ``pack_side``.
    """
    count = len(levels)
    if not count:
        return 0
    prices = struct.unpack(f"<{count}Q", struct.pack(f"<{count}d", *[level[0] for level in levels]))
    sizes = struct.unpack(f"<{count}Q", struct.pack(f"<{count}d", *[level[1] for level in levels]))
    total = 0
    for index, (price, size, level) in enumerate(zip(prices, sizes, levels, strict=True), start=1):
        total += order_hash(index if level_indexed else 0, level[2] & _MASK, side, price, size)
    return total & _MASK


_WIRE_PLAIN: Final = struct.Struct("<BBBdBd").pack  # tag, 18, price, size: a level without orders


def _wire_level(tag: bytes, level: Level) -> bytes:
    # BookLevel {price 1 double, size 2 double, orders 3 int64}; proto3 leaves out zero values
    # (a double by its bits: -0.0 is written), as the protobuf runtime does.
    price, size = _PACK_NUMBER_LE(level[0]), _PACK_NUMBER_LE(level[1])
    if not level[2] and price != _ZERO and size != _ZERO:
        return _WIRE_PLAIN(tag[0], 18, 0x09, level[0], 0x11, level[1])
    body = (b"\x09" + price if price != _ZERO else b"") + (b"\x11" + size if size != _ZERO else b"")
    if level[2]:
        body += b"\x18" + varint(level[2])
    return tag + varint(len(body)) + body


_SMALL_VARINTS: Final = tuple(bytes((value,)) for value in range(0x80))


def varint(value: int) -> bytes:
    """A protobuf varint (a negative value as its 64-bit two's complement, ten bytes)."""
    if 0 <= value < 0x80:
        return _SMALL_VARINTS[value]
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def apply_entries(book: BookValues, entries: Iterable[BookEntry], *, depth: int, full: bool) -> None:
    """Apply one message's entries for one symbol to ``book`` (a copy the caller owns).

    Args:
        book: the symbol's values; changed in place.
        entries: the entries, in message order.
        depth: the book depth (levels a level-indexed book keeps, levels shown).
        full: a full refresh (``35=W``): the book becomes exactly its entries.

    Raises:
        ConversionError: ``book_full`` when a price-keyed side would exceed :data:`MAX_PRICES`.
    """
    if full:
        _refresh(book, list(entries), depth)
        return
    for entry in entries:
        if entry.entry_type in ("0", "1"):
            _apply_book_entry(book, entry, depth)
        elif entry.action != DELETE:
            _apply_session_entry(book, entry)


def _apply_book_entry(book: BookValues, entry: BookEntry, depth: int) -> None:
    is_bid = entry.entry_type == "0"
    if (entry.level is not None) != book.level_indexed:
        _switch_mode(book, depth)
    levels = book.writable(BID if is_bid else ASK)
    if entry.level is not None:
        _apply_level(levels, entry, depth)
    else:
        _apply_price(levels, entry, is_bid)


def _switch_mode(book: BookValues, depth: int) -> None:
    book.level_indexed = not book.level_indexed
    if book.level_indexed:
        del book.writable(BID)[depth:]
        del book.writable(ASK)[depth:]
    else:  # a level-indexed book as prices: one level a price (the first of a price wins)
        book.bids = _by_price(book.bids, is_bid=True)
        book.asks = _by_price(book.asks, is_bid=False)


def _by_price(levels: Sequence[Level], *, is_bid: bool) -> list[Level]:
    seen: dict[float, Level] = {}
    for level in levels:
        seen.setdefault(level[0], level)
    return sorted(seen.values(), key=lambda level: -level[0] if is_bid else level[0])


def _apply_level(levels: list[Level], entry: BookEntry, depth: int) -> None:
    index = (entry.level or 1) - 1
    if entry.action == DELETE:
        if index < len(levels):
            del levels[index]
        return
    level = (_number(entry.price), _number(entry.size), entry.orders)
    if entry.action == CHANGE and index < len(levels):
        levels[index] = level
    elif index < depth:  # New (or a Change of a level not there): insert, shifting deeper levels down
        levels.insert(min(index, len(levels)), level)
        del levels[depth:]  # what is pushed past the depth falls off and does not come back


def find_price(levels: Sequence[Level], price: float, *, is_bid: bool) -> tuple[int, bool]:
    """Where ``price`` is (or would go) in a price-keyed side, best first, and whether it is there."""
    key = -price if is_bid else price
    index = bisect_left(levels, key, key=lambda level: -level[0] if is_bid else level[0])
    return index, index < len(levels) and levels[index][0] == price


def _apply_price(levels: list[Level], entry: BookEntry, is_bid: bool) -> None:
    price = _number(entry.price)
    index, present = find_price(levels, price, is_bid=is_bid)
    if entry.action == DELETE:
        if present:
            del levels[index]
        return
    level = (price, _number(entry.size), entry.orders)
    if present:
        levels[index] = level
        return
    if len(levels) >= MAX_PRICES:
        raise ConversionError("book_full", f"more than {MAX_PRICES} prices on one side")
    levels.insert(index, level)


def _apply_session_entry(book: BookValues, entry: BookEntry) -> None:
    kind, price, size = entry.entry_type, entry.price, entry.size
    if kind == "2" and price is not None and size is not None:
        book.last = price
        book.volume = (book.volume or 0.0) + size
        book.high = price if book.high is None or price > book.high else book.high
        book.low = price if book.low is None or price < book.low else book.low
        book.notional += price * size
        book.traded += size
        book.trades += 1
        book.vwap = book.notional / book.traded if book.traded else book.vwap
    elif kind in _SETS_PRICE and price is not None:
        setattr(book, _SETS_PRICE[kind], price)
    elif kind == "7" and price is not None:
        book.high = price if book.high is None or price > book.high else book.high
    elif kind == "8" and price is not None:
        book.low = price if book.low is None or price < book.low else book.low
    elif kind == "B" and size is not None:
        book.volume = size
    elif kind == "C" and size is not None:
        book.open_interest = size


_SETS_PRICE: Final = {"4": "open", "5": "close", "6": "settle"}
_REFRESH_SETS: Final = {"2": "last", "4": "open", "5": "close", "6": "settle", "7": "high", "8": "low"}
# The entry types (269=) that move a book or its session values: the two sides, the session
# prices (a trade, open, close, settle, high, low), the volume and the open interest; another
# type changes nothing. _orders.c's Fix44Run takes exactly these (scripts/gen_constants.py).
ENTRY_TYPES: Final = "01" + "".join(_REFRESH_SETS) + "BC"


def _refresh(book: BookValues, entries: list[BookEntry], depth: int) -> None:
    # 35=W: the book is exactly its entries; session entries set what they carry (a trade
    # there is the last trade, not a new one: no volume, no VWAP change); the rest survives.
    sides = [e for e in entries if e.entry_type in ("0", "1")]
    book.level_indexed = any(e.level is not None for e in sides)
    book.bids, book.asks = [], []
    for is_bid, levels in ((True, book.bids), (False, book.asks)):
        mine = [e for e in sides if (e.entry_type == "0") == is_bid]
        if book.level_indexed:
            mine.sort(key=lambda e: e.level or 0)  # stable: equal levels keep message order
            levels += [(_number(e.price), _number(e.size), e.orders) for e in mine[:depth]]
        else:
            for entry in mine:
                _apply_price(levels, entry._replace(action=NEW), is_bid)
    for entry in entries:
        name = _REFRESH_SETS.get(entry.entry_type)
        if name is not None and entry.price is not None:
            setattr(book, name, entry.price)
        elif entry.entry_type == "B" and entry.size is not None:
            book.volume = entry.size
        elif entry.entry_type == "C" and entry.size is not None:
            book.open_interest = entry.size


def _number(value: float | None) -> float:
    if value is None:  # the parser requires price and size where they are used
        raise ConversionError("missing_field", "an entry without the price or size it needs")
    return value


def book_changes(before: Sequence[Level], after: Sequence[Level], side: int) -> list[BookChange]:
    """The changes that turn the shown side ``before`` into ``after``, to apply in order.

    INSERTED at n shifts level n and deeper down, DELETED at n shifts deeper levels up,
    CHANGED at n replaces level n (levels count from 1).
    """
    if before == after:  # the side a message did not touch: one comparison in C
        return []
    current = list(before)
    changes: list[BookChange] = []
    index = 0
    while index < len(after):
        want = after[index]
        have = current[index] if index < len(current) else None
        if have == want:
            index += 1
            continue
        if have is not None and have[0] == want[0]:
            current[index] = want
            changes.append(BookChange(CHANGED, side, index + 1, *want))
            index += 1
        elif have is not None and any(level[0] == want[0] for level in current[index + 1 :]):
            del current[index]  # the level here went away; the wanted price is further down
            changes.append(BookChange(DELETED, side, index + 1, *have))
        else:
            current.insert(index, want)
            changes.append(BookChange(INSERTED, side, index + 1, *want))
            index += 1
    for gone in range(len(current), len(after), -1):
        changes.append(BookChange(DELETED, side, gone, *current[gone - 1]))
    return changes
