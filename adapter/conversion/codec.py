"""The market model's protobuf codec: conversion state and converted messages to ``MarketUpdate`` bytes.

Pure: the publish time is passed in. The C fast path (``adapter/formats/feedha_fix/_fastpath.c``)
writes the same bytes for the same input; ``scripts/gen_proto.py`` generates
the field numbers it uses from ``proto/market.proto``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

from feedha.adapter.conversion.book import ASK, BID, BookChange, BookValues, Level, MboBookValues, find_price
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.conversion.staged_side import StagedSide
from feedha.adapter.conversion.state import ConversionState, SymbolValues
from feedha.proto import market_pb2
from feedha.proto.blocks import is_several
from feedha.proto.model import SESSION_VALUES

__all__ = [
    "BlockSymbol",
    "book_from_proto",
    "encode_book_block",
    "encode_session_boundary",
    "encode_update",
    "fill_book",
    "from_proto",
    "roll_symbol",
    "to_proto",
]

_SymbolState = market_pb2.SymbolState
_Entry = market_pb2.Entry
_MarketUpdate = market_pb2.MarketUpdate
_TRADE = market_pb2.ENTRY_TYPE_TRADE

# One symbol of a book block: (symbol, trades as (price, size), the shown book's changes,
# the values after the message, the touched orders packed as SymbolUpdate.orders).
BlockSymbol = tuple[str, Sequence[tuple[float, int]], Sequence[BookChange], SymbolValues, bytes]


def to_proto(values: SymbolValues) -> market_pb2.SymbolState:
    """Convert a symbol's values to the protobuf ``SymbolState``."""
    state = _SymbolState()
    _fill_state(state, values)
    return state


def _fill_state(state: market_pb2.SymbolState, values: SymbolValues) -> None:
    # Attribute assignment: measured faster with upb than a constructor with keywords.
    state.volume = values.volume
    state.high = values.high
    state.low = values.low
    state.last = values.last
    state.vwap = values.vwap
    state.trade_count = values.trade_count
    state.bid = values.bid
    state.ask = values.ask
    state.notional = values.notional
    if values.book is not None:
        fill_book(state, values.book)


def fill_book(state: market_pb2.SymbolState, book: BookValues, depth: int = 0) -> None:
    """Write a ``fix44`` symbol's book and session values into ``state``."""
    out = state.book
    out.SetInParent()  # present even when empty: the symbol is a fix44 one
    out.level_indexed = book.level_indexed
    out.depth = depth
    add_bid, add_ask = out.bids.add, out.asks.add
    for price, size, orders in book.bids:
        add_bid(price=price, size=size, orders=orders)
    for price, size, orders in book.asks:
        add_ask(price=price, size=size, orders=orders)
    if isinstance(book, MboBookValues) and book.orders:  # itch50 snapshots: the live orders, packed
        out.orders = book.orders
    session = state.session
    for name in SESSION_VALUES:
        value = getattr(book, name)
        if value is not None:
            setattr(session, name, value)
    session.notional, session.traded, session.trades = book.notional, book.traded, book.trades


def book_from_proto(state: market_pb2.SymbolState) -> BookValues:
    """The book and session values a ``SymbolState`` carries (``itch50`` snapshots: with the orders)."""
    source = state.book
    book = MboBookValues(orders=source.orders) if source.orders else BookValues()
    book.level_indexed, book.bids, book.asks = (
        source.level_indexed,
        [(level.price, level.size, level.orders) for level in source.bids],
        [(level.price, level.size, level.orders) for level in source.asks],
    )
    session = state.session
    for name in SESSION_VALUES:
        if session.HasField(name):
            setattr(book, name, getattr(session, name))
    book.notional, book.traded, book.trades = session.notional, session.traded, session.trades
    return book


def from_proto(state: market_pb2.SymbolState) -> SymbolValues:
    """Convert a protobuf ``SymbolState`` back to :class:`SymbolValues`."""
    return SymbolValues(
        volume=state.volume,
        high=state.high,
        low=state.low,
        last=state.last,
        vwap=state.vwap,
        trade_count=state.trade_count,
        bid=state.bid,
        ask=state.ask,
        notional=state.notional,
        book=book_from_proto(state) if state.HasField("book") else None,
    )


def encode_update(msg: SourceMessage, values: SymbolValues, *, publish_time_ns: int) -> bytes:
    """Serialize the application message for one converted source message.

    Args:
        msg: the converted message.
        values: the symbol's values after ``msg`` (what :meth:`ConversionState.apply` returned).
        publish_time_ns: the adapter's conversion time, ns since the epoch.

    Returns:
        A serialized ``feedha.v1.MarketUpdate``.
    """
    # Strategy: build the message by attribute assignment and `entries.add`;
    # with the upb backend this measured ~2x faster than nested constructors.
    update = _MarketUpdate(
        symbol=msg.symbol, event_time_ns=msg.event_time_ns, publish_time_ns=publish_time_ns
    )
    add_entry = update.entries.add
    for entry_type, price, size, notional in msg.entries:
        add_entry(type=entry_type, price=price, size=size, notional=notional)
    _fill_state(update.state, values)
    if msg.extra:
        update.extra.update(msg.extra)
    # Deterministic: map entries sorted by key, so every adapter (and the C
    # fast path, adapter/formats/feedha_fix/_fastpath.c) produces the same bytes.
    return update.SerializeToString(deterministic=True)


def encode_session_boundary(
    *, ended: int, started: int, boundary_time_ns: int, reason: int, publish_time_ns: int
) -> bytes:
    """The payload of an end-of-session block: a ``MarketUpdate`` with no symbol and no entries.

    Args:
        ended: the session that ends.
        started: the session that begins.
        boundary_time_ns: the boundary's time (the same on every line).
        reason: a ``feedha.v1.SessionReason`` value.
        publish_time_ns: the adapter's time (differs from line to line, like every block's).
    """
    update = _MarketUpdate(event_time_ns=boundary_time_ns, publish_time_ns=publish_time_ns)
    boundary = update.session_boundary
    boundary.ended = ended
    boundary.started = started
    boundary.boundary_time_ns = boundary_time_ns
    boundary.reason = reason  # type: ignore[assignment]  # an int of the enum
    return update.SerializeToString(deterministic=True)


def encode_book_block(
    event_time_ns: int, publish_time_ns: int, depth: int, symbols: Iterable[BlockSymbol]
) -> bytes:
    """A book block's payload: a ``MarketUpdate`` with a ``SymbolUpdate`` per symbol (itch50's blocks).

    The reference of the C extension ``_orders``' ``encode_block``, which writes the same bytes.

    Args:
        event_time_ns: the source's event time.
        publish_time_ns: the adapter's publish time.
        depth: the shown book's depth (each state's ``Book.depth``).
        symbols: what each touched symbol carries (:data:`BlockSymbol`).
    """
    update = _MarketUpdate(event_time_ns=event_time_ns, publish_time_ns=publish_time_ns)
    for symbol, trades, changes, values, orders in symbols:
        out = update.symbols.add(symbol=symbol)
        for price, size in trades:
            out.trades.add(type=_TRADE, price=price, size=size, notional=price * size)
        for change in changes:
            out.book_changes.add(
                action=change.action, side=change.side, level=change.level,
                price=change.price, size=change.size, orders=change.orders,
            )  # fmt: skip
        state = to_proto(values)
        state.book.depth = depth
        del state.book.bids[depth:], state.book.asks[depth:]  # a block shows the best depth levels
        out.state.CopyFrom(state)
        out.orders = orders
    return update.SerializeToString(deterministic=True)


def roll_block(state: ConversionState, update: market_pb2.MarketUpdate) -> None:
    """Roll one journal block into ``state``, as the state keeps its symbols (a journal's recovery).

    Each symbol the block names takes its state after the block (:mod:`proto.blocks`); a
    state of whole books (:attr:`~adapter.conversion.state.ConversionState.whole_books`)
    rolls the block's levels into them in place (:func:`roll_symbol`), and a state of live
    orders takes the orders the block touched (``roll_orders``).
    """
    if not is_several(update):
        state.set_symbol(update.symbol, from_proto(update.state))
        return
    for each in update.symbols:
        symbol = each.symbol
        if state.whole_books:
            # Read in place and committed as a message's staging is: O(log n) a level.
            state.commit({symbol: roll_symbol(state.view(symbol), each)})
        else:
            state.set_symbol(symbol, from_proto(each.state))
        if each.orders:
            state.roll_orders(symbol, each.orders)


def roll_symbol(before: SymbolValues | None, update: market_pb2.SymbolUpdate) -> SymbolValues:
    """A symbol's values after a book block's ``update``, given its values before (a journal's recovery).

    A block's book shows the best ``depth`` levels a side. A price-keyed book keeps more: its
    whole side is the shown levels, then the levels past the last shown price of the book
    before with the block's ``levels`` applied (from an empty book when ``book_replaced`` or
    when the book before was not price-keyed). A side of fewer than ``depth`` levels is all
    shown; one of more (a block of model 1.3, which carried every price) is taken whole.
    """
    values = from_proto(update.state)
    book = values.book
    if book is None or book.level_indexed:
        return values
    old = before.book if before is not None else None
    keep = old is not None and not old.level_indexed and not update.book_replaced
    sides = {
        BID: _editable(old.bids) if keep and old else [],
        ASK: _editable(old.asks) if keep and old else [],
    }
    for level in update.levels:
        levels = sides.get(level.side)
        if levels is None:
            continue  # no such side: nothing to roll
        index, present = find_price(levels, level.price, is_bid=level.side == BID)
        if level.deleted:
            if present:
                del levels[index]
        elif present:
            levels[index] = (level.price, level.size, level.orders)
        else:
            levels.insert(index, (level.price, level.size, level.orders))
    depth = update.state.book.depth
    book.bids = _whole_side(book.bids, sides[BID], depth, is_bid=True)
    book.asks = _whole_side(book.asks, sides[ASK], depth, is_bid=False)
    return values


def _editable(levels: list[Level]) -> list[Level]:
    # A side to change: a list is copied; a native state's side (a view of its record) is
    # staged over, not copied (adapter.conversion.staged_side), so a record rolls in O(log n).
    return list(levels) if isinstance(levels, list) else cast(list[Level], StagedSide(levels))


def _whole_side(shown: list[Level], rolled: list[Level], depth: int, *, is_bid: bool) -> list[Level]:
    if not shown or len(shown) != depth:
        return shown
    last = shown[-1][0]
    if isinstance(rolled, list):
        return shown + [level for level in rolled if (level[0] < last if is_bid else level[0] > last)]
    # A staged side is sorted, best first: what lies past ``last`` is a tail of it.
    index, present = find_price(rolled, last, is_bid=is_bid)
    del rolled[: index + present]
    for at, level in enumerate(shown):
        rolled.insert(at, level)
    return rolled
