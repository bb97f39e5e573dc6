"""What the fix44 C run (``_orders.Fix44Run``) writes of a book: the best ``depth`` levels and ``levels``.

A block shows each side's best ``depth`` levels (``SymbolUpdate.state.book``); a price-keyed
book keeps more, so the block also carries, in ``SymbolUpdate.levels``, every price the
message's bid and offer entries named, as the message left it (docs/wire-format.md). These
tests decode the C run's blocks and check them against the book the engine holds after each
message; ``test_fix44_run.py`` compares the same blocks with the Python loop's byte for byte,
and ``test_fix44_levels.py`` rolls them back into whole books.
"""

from __future__ import annotations

import struct
from typing import Any

from feedha.adapter.formats.fix44.engine import Fix44Engine
from feedha.bench.micro_fix44 import deep_book_messages
from feedha.proto import fix, market_pb2
from tests.unit.adapter.test_fix44_run import Played, _x, convert, needs_native

STOP_SLOW = 1
BID, ASK = 1, 2  # market.proto Side


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)  # tells -0.0 from 0.0


def _run_one(engine: Fix44Engine, message: bytes) -> market_pb2.MarketUpdate:
    """One message through the C run alone (it must take it): its block, decoded."""
    pos, count, stop, _blocks, _first, _digests, payloads = engine.run_function()(
        message, 0, 0, 0, 1 << 20, 1 << 20, 1, 1, True, True
    )
    assert (pos, count) == (len(message), 1), stop
    return market_pb2.MarketUpdate.FromString(payloads[0])


def _expected_levels(engine: Fix44Engine, symbol: str, named: list[tuple[str, str]]) -> list[tuple[Any, ...]]:
    """The spec of ``levels``: each named price once, bids then asks, best first, as the book has it."""
    values = engine.state.peek(symbol)
    assert values is not None and values.book is not None and not values.book.level_indexed
    out: list[tuple[Any, ...]] = []
    for kind, side, levels in (("0", BID, values.book.bids), ("1", ASK, values.book.asks)):
        prices: list[float] = []
        for entry_kind, text in named:
            if entry_kind == kind and float(text) not in prices:  # ``in`` compares by ==: 0.0 is -0.0
                prices.append(float(text))
        for price in sorted(prices, reverse=side == BID):
            level = next((level for level in levels if level[0] == price), None)
            if level is None:
                out.append((side, _bits(price), _bits(0.0), 0, True))
            else:
                out.append((side, _bits(level[0]), _bits(level[1]), level[2], False))
    return out


def _decoded_levels(update: market_pb2.SymbolUpdate) -> list[tuple[Any, ...]]:
    return [
        (level.side, _bits(level.price), _bits(level.size), level.orders, level.deleted)
        for level in update.levels
    ]


def _shown(levels: Any) -> list[tuple[float, float, int]]:
    return [(level.price, level.size, level.orders) for level in levels]


@needs_native
def test_a_price_keyed_block_shows_depth_levels_and_names_each_price_as_the_message_left_it() -> None:
    depth = 3
    engine = Fix44Engine(depth=depth, prefer_native=True)
    opening = _x(
        1,
        *[("0", "0", "AAA", str(100 - k), "1") for k in range(8)],
        *[("0", "1", "AAA", str(101 + k), "2") for k in range(8)],
        ("0", "0", "BB", "10", "1"),
    )
    assert convert(engine, opening, Played()) == {}
    cases: list[list[tuple[str, str, str, str, str]]] = [
        [("1", "0", "AAA", "95", "7")],  # a hidden level changes: the shown book does not
        [("0", "1", "AAA", "104.5", "3"), ("2", "1", "AAA", "101", "")],  # a shown delete, a hidden new
        [("2", "0", "AAA", "42", ""), ("2", "1", "AAA", "42", "")],  # deletes of absent prices
        [("0", "0", "AAA", "0", "1"), ("1", "0", "AAA", "-0", "2")],  # one price twice: 0.0 is -0.0
        [("2", "0", "AAA", "-0", ""), ("0", "0", "AAA", "0", "4")],  # written with the level's own bits
        [("2", "0", "AAA", "0", ""), ("0", "0", "AAA", "97", "5"), ("1", "0", "AAA", "97", "6")],
        [("0", "0", "AAA", "100.5", "1"), ("2", "0", "AAA", "100.5", ""), ("0", "2", "AAA", "9", "1")],
        [("0", "2", "AAA", "99", "3"), ("0", "4", "AAA", "98", "")],  # no book entry: no levels
    ]
    for seq, entries in enumerate(cases, start=2):
        update = _run_one(engine, _x(seq, *entries)).symbols[0]
        book = engine.state.peek("AAA").book  # type: ignore[union-attr]
        assert book is not None and len(book.bids) > depth and len(book.asks) > depth
        assert _shown(update.state.book.bids) == book.bids[:depth]
        assert _shown(update.state.book.asks) == book.asks[:depth]
        assert update.state.book.depth == depth and not update.book_replaced
        named = [(kind, price) for _action, kind, _symbol, price, _size in entries if kind in "01"]
        assert _decoded_levels(update) == _expected_levels(engine, "AAA", named), entries
    gone = _run_one(engine, _x(10, ("2", "0", "AAA", "-0", ""), ("2", "0", "AAA", "0", ""))).symbols[0]
    assert _decoded_levels(gone) == [(BID, _bits(-0.0), _bits(0.0), 0, True)]  # as its first entry gave it


@needs_native
def test_a_level_indexed_book_carries_no_levels() -> None:
    engine = Fix44Engine(depth=2, prefer_native=True)
    opening = fix.encode_message(
        [(35, "X"), (34, 1), (52, "20260105-14:30:00"), (268, 1)]
        + [(279, "0"), (269, "0"), (55, "BB"), (270, "10"), (271, "1"), (1023, "1")]
    )
    assert convert(engine, opening, Played()) == {}
    change = fix.encode_message(
        [(35, "X"), (34, 2), (52, "20260105-14:30:00"), (268, 2)]
        + [(279, "0"), (269, "0"), (55, "BB"), (270, "9"), (271, "1"), (1023, "2")]
        + [(279, "2"), (269, "1"), (55, "BB"), (270, "11"), (1023, "1")]
    )
    update = _run_one(engine, change).symbols[0]
    assert _shown(update.state.book.bids) == [(10.0, 1.0, 0), (9.0, 1.0, 0)]
    assert update.state.book.level_indexed and not update.levels and not update.book_replaced


def _play(engine: Fix44Engine, messages: list[bytes], frame: int = 50) -> int:
    """Play ``messages`` as the core does (runs; a message a run stops at by the careful path): blocks."""
    played = Played()
    for start in range(0, len(messages), frame):
        assert convert(engine, b"".join(messages[start : start + frame]), played) == {}
    return len(played.digests) // 8


@needs_native
def test_fifty_changes_of_a_book_of_3000_prices_a_side_each_publish_a_small_block() -> None:
    # Before model 1.4 each of these blocks carried 6,000 levels (over the 64 KiB block limit):
    # every one was quarantined ``oversize``.
    depth = 10
    messages, warm = deep_book_messages(50, prices=3000)
    engine = Fix44Engine(depth=depth, prefer_native=True)
    assert _play(engine, messages[:warm]) == warm
    book = engine.state.peek("D").book  # type: ignore[union-attr]
    assert book is not None and len(book.bids) == len(book.asks) == 3000
    frame = b"".join(messages[warm:])
    pos, count, stop, _blocks, _first, _digests, payloads = engine.run_function()(
        frame, 0, warm + 1, 0, 1 << 22, 1 << 20, 1, 1, True, True
    )
    assert (pos, count) == (len(frame), 50) and stop != STOP_SLOW
    assert max(len(payload) for payload in payloads) < 2048
    for payload in payloads:
        update = market_pb2.MarketUpdate.FromString(payload).symbols[0]
        assert len(update.state.book.bids) == len(update.state.book.asks) == depth
        assert len(update.levels) == 1 and not update.levels[0].deleted
    assert engine.state.digest == engine.state.recompute_digest()  # the digest still hashes every price
