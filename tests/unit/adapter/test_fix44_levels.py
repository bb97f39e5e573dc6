"""fix44 blocks show the best depth levels; the prices they set keep the whole book (model 1.4).

A price-keyed book keeps every price (up to MAX_PRICES a side) while a block
shows the best ``depth``; ``SymbolUpdate.levels`` carries the prices the
message named, so a reader holding the book before the message -- the
journal's recovery, ``codec.roll_symbol`` -- keeps the whole book. Checked
here: rolling every block of a capture written by simplefix rebuilds the
engine's state and digest message by message (both engines), a book of
thousands of prices publishes every message in a small block, and an adapter
restarted on its journal alone comes back with the whole books.
"""

from __future__ import annotations

import struct
from hashlib import blake2b
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.conversion import choice
from feedha.adapter.conversion._reference import LoopEngine
from feedha.adapter.conversion.book import BookValues
from feedha.adapter.conversion.codec import roll_symbol
from feedha.adapter.conversion.state import SymbolValues, symbol_digest
from feedha.adapter.formats.fix44.engine import BookState, Fix44Engine
from feedha.proto import fix, market_pb2, wire
from tests.fix44_capture import make_capture

from .group_harness import CoreGroup

ENGINES = [False, True]  # the Python loop, and the C run where it takes a message
EVENT_NS = 1_790_000_000_000_000_000


def _convert(engine: Fix44Engine, message: bytes, seq: int) -> list[bytes]:
    """The payloads of one message through the engine's run (the C run where it takes it)."""
    run = engine.run_function()
    result = run(message, 0, seq, 0, 1 << 20, 1, EVENT_NS, 1, True, True)
    if result[1] == 0 and result[0] == 0:  # the C run stopped before it: the Python loop's
        result = LoopEngine.run(engine, message, 0, seq, 0, 1 << 20, 1, EVENT_NS, 1, True, True)
    payloads: list[bytes] = result[6] or []
    return payloads


def _roll(state: BookState, payload: bytes) -> None:
    for update in market_pb2.MarketUpdate.FromString(payload).symbols:
        state.set_symbol(update.symbol, roll_symbol(state.peek(update.symbol), update))


@pytest.mark.parametrize("native", ENGINES)
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(min_value=0, max_value=10_000), depth=st.sampled_from([1, 3, 5]))
def test_rolling_every_block_keeps_the_whole_books_and_the_digest(
    native: bool, seed: int, depth: int
) -> None:
    capture = make_capture(symbols=8, messages=200, seed=seed, depth=depth)
    engine = Fix44Engine(depth=depth, prefer_native=native)
    rolled = BookState(depth)
    hidden = 0
    for seq, message in enumerate(capture.messages, start=1):
        for payload in _convert(engine, message, seq):
            _roll(rolled, payload)
            for update in market_pb2.MarketUpdate.FromString(payload).symbols:
                book = update.state.book
                assert len(book.bids) <= depth and len(book.asks) <= depth
        assert rolled.digest == engine.state.digest, f"source_seq {seq}"
        hidden += sum(
            len(v.book.bids) > depth or len(v.book.asks) > depth
            for v in engine.state.snapshot().values()
            if v.book is not None
        )
    assert rolled.snapshot() == engine.state.snapshot()
    assert hidden > 50  # books did hold more than a block shows


def _deep_messages(prices: int, changes: int) -> list[bytes]:
    head: list[tuple[int, Any]] = [(35, "X"), (49, "VENUE"), (56, "FEEDHA"), (52, "20260105-14:30:00.000")]
    out: list[bytes] = []
    for side, sign in (("0", -1), ("1", 1)):
        for start in range(0, prices, 50):
            body = [*head, (34, len(out) + 1), (268, min(50, prices - start))]
            for k in range(start, min(prices, start + 50)):
                body += [
                    (279, 0),
                    (269, side),
                    (55, "D"),
                    (270, f"{(100_000 + sign * (k + 1)) / 100:.2f}"),
                    (271, 5),
                ]
            out.append(fix.encode_message(body))
    for k in range(changes):
        side, sign = ("0", -1) if k % 2 else ("1", 1)
        price = f"{(100_000 + sign * (1 + (k * 37) % prices)) / 100:.2f}"
        action = 2 if k % 5 == 0 else 1  # Deletes of hidden and shown prices, and Changes
        entry = [(279, action), (269, side), (55, "D"), (270, price), (271, 9)]
        out.append(fix.encode_message([*head, (34, len(out) + 1), (268, 1), *entry]))
    return out


@pytest.mark.parametrize("native", ENGINES)
def test_a_book_of_thousands_of_prices_publishes_every_message_in_a_small_block(native: bool) -> None:
    messages = _deep_messages(3000, 60)
    engine = Fix44Engine(depth=10, prefer_native=native)
    rolled = BookState(10)
    sizes = []
    for seq, message in enumerate(messages, start=1):
        payloads = _convert(engine, message, seq)
        assert len(payloads) == 1, f"source_seq {seq} not published"
        _roll(rolled, payloads[0])
        sizes.append(len(payloads[0]))
    book = engine.state.peek("D")
    assert book is not None and book.book is not None
    assert len(book.book.bids) + len(book.book.asks) > 5000  # 3,000 a side less the Deletes
    assert max(sizes[-60:]) < 2048 and max(sizes) < wire.MAX_PAYLOAD
    assert rolled.digest == engine.state.digest and rolled.snapshot() == engine.state.snapshot()


def test_an_adapter_restarted_alone_on_its_journal_has_the_whole_books() -> None:
    group = CoreGroup(1, rate=1500, fix44=True)
    group.run(1.5)
    group.run(0.2, source=False)
    state = group.members[1].core.state
    before, digest = state.snapshot(), state.digest
    assert any(len(v.book.bids) > 10 for v in before.values() if v.book is not None)  # more than shown
    group.kill(1)
    member = group.restart(1)
    assert member.core.state.digest == digest
    assert member.core.state.snapshot() == before


def _splitmix(*fields: int) -> int:
    """The level mix as docs/converters.md states it, written out again here."""
    mask = (1 << 64) - 1
    index, orders, side, price, size = fields
    x = (index * 0x9E3779B97F4A7C15 + orders + (side << 62) + price * 0xBF58476D1CE4E5B9
         + size * 0x94D049BB133111EB) & mask  # fmt: skip
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & mask
    return x ^ (x >> 31)


def _bits(value: float) -> int:
    return int.from_bytes(struct.pack(">d", value), "big")


@pytest.mark.parametrize("level_indexed", [False, True])
def test_a_books_digest_hashes_each_side_as_a_sum_of_level_mixes(level_indexed: bool) -> None:
    bids = [(101.5, 10.0, 3), (101.25, 4.0, 0), (-0.0, 1.0, 1)]
    asks = [(101.75, 2.0, 0)]
    book = BookValues(level_indexed, bids, asks, volume=7.0, last=101.5)
    want = b"L" if level_indexed else b"P"
    for side, levels in ((1, bids), (2, asks)):
        total = sum(
            _splitmix(i + 1 if level_indexed else 0, orders, side, _bits(price), _bits(size))
            for i, (price, size, orders) in enumerate(levels)
        )
        want += len(levels).to_bytes(4, "big") + (total % (1 << 64)).to_bytes(8, "big")
    assert book.digest_bytes()[: len(want)] == want
    values = SymbolValues(volume=7, last=101.5, bid=101.5, ask=101.75, book=book)
    python = symbol_digest("ESZ6", values)
    fixed = struct.pack(">qddddqddd", 7, 0.0, 0.0, 101.5, 0.0, 0, 101.5, 101.75, 0.0)
    hashed = blake2b(b"ESZ6\0" + fixed + book.digest_bytes(), digest_size=8).digest()
    assert python == int.from_bytes(hashed, "big")
    store = choice.make_order_store(prefer_native=True)  # the C symbol_digest where built
    assert store.symbol_digest("ESZ6", values) == python
