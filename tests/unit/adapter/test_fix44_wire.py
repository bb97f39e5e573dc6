"""fix44 blocks written directly equal the protobuf runtime's bytes; staged books share sides safely."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.conversion.book import ASK, BID, BookChange, BookValues, book_changes
from feedha.adapter.conversion.codec import to_proto
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.conversion.state import SymbolValues
from feedha.adapter.errors import ConversionError
from feedha.adapter.formats.fix44.engine import BookState, Fix44Engine
from feedha.adapter.formats.fix44.wire import encode_symbol
from feedha.proto import fix, market_pb2
from tests.fix44_capture import make_capture


def _runtime_block(
    engine: Fix44Engine, msg: SourceMessage, staged: Mapping[str, SymbolValues], publish_time_ns: int
) -> bytes:
    """The block as the protobuf runtime writes it (how the engine wrote it before fix44_wire)."""
    update = market_pb2.MarketUpdate(event_time_ns=msg.event_time_ns, publish_time_ns=publish_time_ns)
    for symbol, entries in msg.updates:
        values = staged[symbol]
        out = update.symbols.add(symbol=symbol)
        for entry in entries:
            if entry.entry_type == "2" and not msg.full_refresh and entry.action != 2:
                price, size = entry.price or 0.0, entry.size or 0.0
                out.trades.add(
                    type=market_pb2.ENTRY_TYPE_TRADE, price=price, size=int(size), notional=price * size
                )
        before = engine.state.peek(symbol)
        old = before.book if before is not None and before.book is not None else BookValues()
        book = values.book or BookValues()
        for side, old_levels, new_levels in ((BID, old.bids, book.bids), (ASK, old.asks, book.asks)):
            for change in book_changes(old_levels[: engine.depth], new_levels[: engine.depth], side):
                out.book_changes.add(**change._asdict())
        state = to_proto(values)
        state.book.depth = engine.depth
        del state.book.bids[engine.depth :], state.book.asks[engine.depth :]
        out.state.CopyFrom(state)
        _runtime_levels(out, old if before is not None else None, book, entries, msg.full_refresh)
    payload: bytes = update.SerializeToString(deterministic=True)
    return payload


def _runtime_levels(
    out: market_pb2.SymbolUpdate, old: BookValues | None, book: BookValues, entries: Any, full: bool
) -> None:
    """SymbolUpdate.levels and book_replaced as docs/wire-format.md says, through the runtime."""
    if book.level_indexed:
        return
    kinds = [entry for entry in entries if entry.entry_type in ("0", "1")]
    if full or old is None or old.level_indexed or any(entry.level is not None for entry in kinds):
        out.book_replaced = True
        for side, levels in ((BID, book.bids), (ASK, book.asks)):
            for price, size, orders in levels:
                out.levels.add(side=side, price=price, size=size, orders=orders)  # type: ignore[arg-type]
        return
    for side, levels in ((BID, book.bids), (ASK, book.asks)):
        named: list[float] = []
        for entry in kinds:
            if (entry.entry_type == "0") == (side == BID) and entry.price not in named:
                named.append(entry.price)
        for price in sorted(named, reverse=side == BID):
            level = next((level for level in levels if level[0] == price), None)
            if level is None:
                out.levels.add(side=side, price=price, deleted=True)  # type: ignore[arg-type]
            else:
                out.levels.add(side=side, price=level[0], size=level[1], orders=level[2])  # type: ignore[arg-type]


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(min_value=0, max_value=10_000), depth=st.sampled_from([1, 3, 10]))
def test_blocks_and_digests_equal_the_runtime_and_a_fresh_state_over_a_capture(seed: int, depth: int) -> None:
    capture = make_capture(symbols=12, messages=150, seed=seed, depth=depth)
    engine = Fix44Engine(depth=depth)
    converted = 0
    for message in capture.messages:
        body, _end = fix.next_message(message, 0)
        assert body is not None
        try:
            msg = engine.parse(body)
            staged = engine.state.stage(msg)
        except ConversionError:
            continue
        block = engine.encode_staged(msg, staged, 1_790_000_000_000_000_000)
        assert block == _runtime_block(engine, msg, staged, 1_790_000_000_000_000_000)
        engine.state.commit(staged)
        converted += 1
    fresh = BookState(depth)
    fresh.restore(engine.state.snapshot())  # copies: nothing cached, every side packed again
    assert converted > 100
    assert engine.state.digest == fresh.digest == engine.state.recompute_digest()


_numbers = st.sampled_from([0.0, -0.0, 1.5, -2.25, 1e300, 5e-324]) | st.floats(allow_nan=False)
_levels = st.lists(
    st.tuples(_numbers, _numbers, st.integers(min_value=0, max_value=(1 << 63) - 1)), max_size=5
)
_optional = st.none() | _numbers


@settings(max_examples=150, deadline=None)
@given(
    bids=_levels, asks=_levels, level_indexed=st.booleans(),
    sessions=st.lists(_optional, min_size=9, max_size=9),
    trades=st.lists(st.tuples(_numbers.filter(lambda v: abs(v) < 1e9), st.integers(0, 10**6)), max_size=3),
    depth=st.integers(min_value=0, max_value=1000), symbol=st.text(max_size=8), count=st.integers(0, 1 << 40),
)  # fmt: skip
def test_a_symbol_update_equals_the_runtime_bytes_for_any_values(
    bids: list[tuple[float, float, int]],
    asks: list[tuple[float, float, int]],
    level_indexed: bool,
    sessions: list[float | None],
    trades: list[tuple[float, int]],
    depth: int,
    symbol: str,
    count: int,
) -> None:
    book = BookValues(level_indexed, bids, asks, *sessions, notional=sessions[0] or 0.0, trades=count)
    values = SymbolValues(volume=count, high=sessions[1] or 0.0, bid=-0.0, trade_count=count, book=book)
    changes = [BookChange(1 + i % 3, 1 + i % 2, i, *level) for i, level in enumerate(bids)]
    want = market_pb2.MarketUpdate()
    out = want.symbols.add(symbol=symbol)
    for price, size in trades:
        out.trades.add(type=market_pb2.ENTRY_TYPE_TRADE, price=price, size=size, notional=price * size)
    for change in changes:
        out.book_changes.add(**change._asdict())
    state = to_proto(values)
    state.book.depth = depth
    del state.book.bids[depth:], state.book.asks[depth:]
    out.state.CopyFrom(state)
    got = encode_symbol(symbol, [(p, float(s)) for p, s in trades], changes, values, depth)
    assert got == want.SerializeToString(deterministic=True)


def test_a_staged_book_shares_untouched_sides_and_never_changes_the_state() -> None:
    engine = Fix44Engine(prefer_native=False)  # BookState's sharing (the state in C shares nothing)
    first = fix.encode_message(
        [(35, "X"), (49, "V"), (56, "F"), (34, 1), (52, "20260105-14:30:00"), (268, 2),
         (279, 0), (269, "0"), (55, "A"), (270, 99), (271, 5),
         (279, 0), (269, "1"), (55, "A"), (270, 101), (271, 5)]
    )  # fmt: skip
    body, _end = fix.next_message(first, 0)
    assert body is not None
    engine.state.commit(engine.state.stage(engine.parse(body)))
    committed = engine.state.peek("A")
    assert committed is not None and committed.book is not None
    digest = engine.state.digest
    change = fix.encode_message(
        [(35, "X"), (49, "V"), (56, "F"), (34, 2), (52, "20260105-14:30:00"), (268, 1),
         (279, 1), (269, "0"), (55, "A"), (270, 99), (271, 7)]
    )  # fmt: skip
    body, _end = fix.next_message(change, 0)
    assert body is not None
    staged = engine.state.stage(engine.parse(body))["A"].book
    assert staged is not None
    assert staged.asks is committed.book.asks and staged.bids is not committed.book.bids
    assert committed.book.bids == [(99.0, 5.0, 0)] and staged.bids == [(99.0, 7.0, 0)]
    assert engine.state.digest == digest == engine.state.recompute_digest()
    copy = engine.state.get("A")
    assert copy is not None and copy.book is not None and copy.book.bids is not committed.book.bids


def test_a_negative_zero_price_is_encoded_as_the_runtime_does_after_a_zero_one() -> None:
    engine = Fix44Engine()
    for seq, action, price in ((1, 0, "0"), (2, 0, "1"), (3, 1, "-0"), (4, 1, "0")):
        message = fix.encode_message(
            [(35, "X"), (49, "V"), (56, "F"), (34, seq), (52, "20260105-14:30:00"), (268, 1),
             (279, action), (269, "1"), (55, "Z"), (270, price), (271, 5)]
        )  # fmt: skip
        body, _end = fix.next_message(message, 0)
        assert body is not None
        msg = engine.parse(body)
        staged = engine.state.stage(msg)
        assert engine.encode_staged(msg, staged, 7) == _runtime_block(engine, msg, staged, 7)
        engine.state.commit(staged)
