"""The client's books: BookKeeper, the symbol filter, subscribe --books, purges of fix44 blocks."""

from __future__ import annotations

import argparse
import io
import json
from types import SimpleNamespace
from typing import Any

from feedha.adapter.core.purge import PurgeEntry, purged_block
from feedha.adapter.formats.fix44.engine import Fix44Engine
from feedha.client import console
from feedha.client._feed_core import FeedCore, _SymbolFilter, _update_wanted
from feedha.client.books import BookKeeper
from feedha.client.events import Delivery, Purged
from feedha.client.subscriber import SubscriberConfig
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
    lines = console.describe_all(delivery, console._keeper(True))
    assert [line["symbol"] for line in lines] == ["AAA", "BBB"]
    assert lines[0]["bids"] == [[10.5, 3.0]] and lines[0]["changes"] == [["insert", "bid", 1, 10.5, 3.0]]
    assert json.loads(json.dumps(lines[1]))["asks"] == [[20.0, 4.0]]  # JSON numbers
    assert "--books" in console._parser().format_help()
    assert isinstance(console._parser().parse_args(["--channel", "X=1", "--books"]), argparse.Namespace)


def _core(*symbols: str) -> FeedCore:
    core = FeedCore(SubscriberConfig(), ("", ""))
    core.filters = {(1, ""): _SymbolFilter(symbols)}
    return core


def test_the_key_file_form_prints_and_keeps_only_the_subscribed_symbols_of_a_block() -> None:
    payload = _block()
    delivery = Delivery(1, 1, 1, 1, 0, 1, 0, payload, 0, len(payload))
    core = _core("BBB")
    assert core.select([delivery], status=True) == [delivery]  # BBB is in it
    events = iter([[delivery], []])
    client = SimpleNamespace(
        poll_events=lambda _timeout: next(events),
        stats=lambda: SimpleNamespace(channels={"EQ": SimpleNamespace(channel=1)}),
        book_updates_of=core.book_updates,
    )
    out = io.StringIO()
    args = argparse.Namespace(json=True, seconds=None, count=1, books=True)
    assert console._print_channel(client, "EQ", args, 0.0, out) == 1
    printed = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["symbol"] for line in printed] == ["BBB"]  # not AAA, which shares the block
    assert core.book("AAA") is None and core.books.book("AAA") is None
    book = core.book("BBB")
    assert book is not None and book.asks == ((20.0, 4.0, 0),)
    core.filters = {(1, ""): _SymbolFilter(["AAA"])}  # the subscription moved on
    assert core.book("BBB") is None
    image = market_pb2.MarketUpdate(symbol="CCC")
    image.state.book.SetInParent()
    assert core.books.observe(2, image, is_image=True, wanted=lambda s: s == "AAA") == []


def test_a_purged_block_of_several_symbols_reaches_the_subscribers_of_each_of_them() -> None:
    record = SimpleNamespace(msg_seq=5, time_ns=0, source_stream=1, source_seq=1, payload=_block(), flags=0)
    entry = PurgeEntry(purge_id=3, first_msg_seq=5, last_msg_seq=5, time_ns=1, reason="busted")
    one = PurgeEntry(purge_id=1, first_msg_seq=5, last_msg_seq=5, time_ns=1, reason="x")
    block = purged_block(record, _Book(entry))  # type: ignore[arg-type]  # a book of one purge
    assert block is not None
    tombstone = market_pb2.Tombstone.FromString(block[2])
    assert (tombstone.symbol, list(tombstone.symbols), tombstone.purge_id) == ("", ["AAA", "BBB"], 3)
    event = Purged.from_tombstone(1, 5, block[2], delayed=False)
    assert event.symbols == ("AAA", "BBB")
    assert _core("BBB").select([event], status=True) == [
        Purged(1, 5, "", 3, "busted", symbols=("BBB",))
    ]  # named with the client's symbols only
    documented = bytes.fromhex("10 01 1a 01 78 22 04 45 53 5a 36 22 04 4e 51 5a 36")  # docs/wire-format.md
    assert purged_block(_record_of_symbols("ESZ6", "NQZ6"), _Book(one))[2] == documented  # type: ignore[arg-type,index]
    quiet = _core("CCC")
    assert quiet.select([event], status=True) == [] and quiet.filtered == 1


def _record_of_symbols(*symbols: str) -> SimpleNamespace:
    update = market_pb2.MarketUpdate()
    for symbol in symbols:
        update.symbols.add(symbol=symbol)
    return SimpleNamespace(
        msg_seq=5, time_ns=0, source_stream=1, source_seq=1, payload=update.SerializeToString(), flags=0
    )


class _Book:
    def __init__(self, entry: PurgeEntry) -> None:
        self.entry = entry

    def __len__(self) -> int:
        return 1

    def covering(self, msg_seq: int) -> PurgeEntry | None:
        return self.entry if msg_seq == self.entry.first_msg_seq else None
