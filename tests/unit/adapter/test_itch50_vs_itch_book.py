"""itch50's books against a third-party ITCH 5.0 book engine: the ``itch-book`` package (C++).

Seeded captures are fed, byte for byte, to itch-book (its ``Session``: the
BinaryFILE stream parsed and every message applied to its books) and to
feedha's itch50 engine (MoldUDP64 packets through the runs and the careful
path, as the adapter's core converts them; tests/itch50_feed.py). Every
stock's final book must be equal at the depth both give: price, size and
number of orders of each shown level, best first, both sides. itch-book
gives the top ``depth`` levels (at most 50) as its ``depth`` table, a row each
time they change; a stock's last row is its final book, and a stock whose
book ended empty is compared as empty on both sides. Session values
(volume, VWAP ...) are not compared: itch-book has no such figure (its
trades table is per print); tests/itch50_reference.py checks them.

One difference of the two is known and kept out of these captures: itch-book
rejects an add whose order reference number is 2**36 or more (its order
table is dense; the add is counted ``rejected`` and later messages on the
order ``missing_ref``), where the specification's reference is any u64 and
feedha takes it (tests/unit/adapter/test_itch50_books.py). The generated
days number orders from about 10**9, as NASDAQ's do; the bench's busy
stocks' orders are moved by 2**32.
"""

from __future__ import annotations

from typing import Any

import pytest

from feedha.adapter.formats.itch50.day import make_itch_capture
from feedha.adapter.formats.itch50.engine import Itch50Engine
from feedha.bench.itch50_day import itch_book_books, make_day_capture, shown_books
from tests.itch50_feed import convert, packets

pytest.importorskip("itch_book")  # a dev dependency (pyproject.toml, the bench extra)


def _engine_books(data: bytes, depth: int) -> tuple[dict[str, Any], dict[str, int]]:
    # The engine's final books ([price, size, orders], best first) of every stock with a live order.
    engine = Itch50Engine(depth=depth)
    reasons: dict[str, int] = {}
    for packet in packets(data, per_packet=23):
        for reason, count in convert(engine, packet).items():
            reasons[reason] = reasons.get(reason, 0) + count
    snapshot = engine.state.snapshot()
    assert all(values.book is not None for values in snapshot.values())
    return shown_books(((symbol, values.book) for symbol, values in snapshot.items()), depth=depth), reasons


def _itch_book_counters(data: bytes) -> dict[str, Any]:
    from itch_book._core import Session

    session = Session(tables=[], depth=0, symbols=[])
    session.feed(data)
    return session.stats()


# Many stocks with shallow books at the adapters' default depth; few stocks with books deeper
# than 10 levels a side at itch-book's largest depth.
@pytest.mark.parametrize(("stocks", "depth"), [(400, 10), (12, 50)])
def test_a_seeded_day_gives_the_same_books_as_itch_book(stocks: int, depth: int) -> None:
    # Every message type the generator writes: S, R, H, A, F, E, C (printable and not), X, D, U,
    # P, Q, B, I, N (itch50 skips S H B I N; itch-book counts them), ~9,000 messages.
    capture = make_itch_capture(symbols=stocks, orders=4_000, seed=61)
    counters = _itch_book_counters(capture.data)
    assert counters["messages"] == capture.messages
    assert counters["missing_ref"] == counters["rejected"] == counters["malformed"] == 0
    mine, reasons = _engine_books(capture.data, depth)
    theirs = itch_book_books(capture.data, depth=depth)
    assert set(reasons) == {"skipped"}  # nothing quarantined
    assert len(theirs) > stocks * 3 // 4 and counters["live_orders"] == capture.live_orders
    assert {symbol for symbol in mine if mine[symbol] != theirs.get(symbol)} == set()
    assert mine == theirs
    deepest = max(max(len(book["bids"]), len(book["asks"])) for book in theirs.values())
    assert deepest > 10 or depth == 10  # at depth 50, levels past the adapters' default are compared


def test_the_bench_day_with_its_busy_stocks_gives_the_same_books_as_itch_book() -> None:
    # feedha bench itch50_day's capture (two generated days interleaved, 8 busy stocks), small.
    capture = make_day_capture(12_000)
    counters = _itch_book_counters(capture.data)
    assert counters["messages"] == capture.messages == 12_000
    assert counters["missing_ref"] == counters["rejected"] == counters["crossed_books"] == 0
    mine, reasons = _engine_books(capture.data, 10)
    assert reasons == {}
    theirs = itch_book_books(capture.data)
    assert mine == theirs and set(capture.busy) <= set(theirs)
    sizes = {
        symbol: sum(level[2] for level in book["bids"] + book["asks"]) for symbol, book in theirs.items()
    }
    quiet = sorted(sizes[symbol] for symbol in sizes if symbol not in capture.busy)
    assert min(sizes[symbol] for symbol in capture.busy) > 10 * quiet[len(quiet) // 2]
