"""The client's books: BookKeeper from fix44 blocks and images, the symbol filter, subscribe --books."""

from __future__ import annotations

import argparse
import json
from typing import Any

from feedha.adapter.conversion.fix44_engine import Fix44Engine
from feedha.client import console
from feedha.client._feed_core import _SymbolFilter, _update_wanted
from feedha.client.books import BookKeeper
from feedha.client.events import Delivery
from feedha.proto import fix, market_pb2

HEAD: list[tuple[int, Any]] = [(49, "V"), (56, "F"), (52, "20260105-14:30:00.000")]


def _block() -> bytes:
    message = fix.encode_message(
        [(35, "X"), *HEAD, (34, 1), (268, 2),
         (279, 0), (269, "0"), (55, "AAA"), (270, "10.5"), (271, 3),
         (279, 0), (269, "1"), (55, "BBB"), (270, "20"), (271, 4), (1023, 1)]
    )  # fmt: skip
    run = Fix44Engine().run(message, 0, 0, 0, -8192, 10, 1, 1, True, True)
    assert run[6] is not None
    return run[6][0]


def test_the_keeper_takes_every_symbol_of_a_block_and_the_filter_keeps_the_wanted() -> None:
    update = market_pb2.MarketUpdate.FromString(_block())
    keeper = BookKeeper()
    updates = keeper.observe(7, update, wanted=lambda symbol: symbol == "BBB")
    assert [u.symbol for u in updates] == ["BBB"] and keeper.book("AAA") is None
    book = keeper.book("BBB")
    assert book is not None and book.asks == ((20.0, 4.0, 0),) and book.depth == 10
    assert updates[0].changes[0].action == market_pb2.BOOK_ACTION_INSERTED
    assert _update_wanted(_SymbolFilter(["B*"]), update) and not _update_wanted(_SymbolFilter(["C"]), update)


def test_subscribe_books_prints_each_symbols_book_update() -> None:
    payload = _block()
    delivery = Delivery(1, 1, 1, 1, 0, 1, 0, payload, 0, len(payload))
    lines = console.describe_all(delivery, BookKeeper())
    assert [line["symbol"] for line in lines] == ["AAA", "BBB"]
    assert lines[0]["bids"] == [[10.5, 3.0]] and lines[0]["changes"] == [["insert", "bid", 1, 10.5, 3.0]]
    assert json.loads(json.dumps(lines[1]))["asks"] == [[20.0, 4.0]]  # JSON numbers
    assert "--books" in console._parser().format_help()
    assert isinstance(console._parser().parse_args(["--channel", "X=1", "--books"]), argparse.Namespace)
