"""The C order table and price levels (``_orders``) against their Python reference, op for op."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.conversion import choice
from feedha.adapter.conversion.book import BookChange, BookValues, MboBookValues
from feedha.adapter.conversion.state import SymbolValues
from feedha.adapter.formats.itch50.day import make_itch_capture
from feedha.adapter.formats.itch50.engine import Itch50Engine
from feedha.adapter.formats.itch50.state import MboState
from feedha.proto import market_pb2
from tests.itch50_feed import Played, convert, packets

NATIVE = choice.make_order_store()
REFERENCE = choice.make_order_store(prefer_native=False)
needs_native = pytest.mark.skipif(not NATIVE.is_native, reason="adapter.conversion._orders is not built")

U64 = 2**64 - 1
REFS = st.one_of(st.integers(0, 40), st.integers(0, U64))  # few refs: adds collide, removes find them
ORDER = st.tuples(
    REFS, st.integers(0, 5), st.sampled_from((1, 2)), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)
)
TABLE_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), ORDER),
        st.tuples(st.just("set_shares"), st.tuples(REFS, st.integers(0, 2**32 - 1))),
        st.tuples(st.just("remove"), st.tuples(REFS)),
        st.tuples(st.just("get"), st.tuples(st.one_of(REFS, st.integers(-5, -1), st.integers(2**64, 2**65)))),
    ),
    max_size=400,
)


def _outcome(call: Any, *args: Any) -> Any:
    try:
        return ("ok", call(*args))
    except (KeyError, OverflowError) as exc:
        return ("raised", type(exc))


def test_the_extension_is_built_in_this_checkout() -> None:
    # Without it an itch50 adapter holds ~5x the memory per live order: CI must notice.
    assert choice.IS_NATIVE_ORDERS_BUILT and NATIVE.is_native
    assert MboState().orders.__class__.__module__ == "feedha.adapter.conversion._orders"


@needs_native
@settings(max_examples=60, deadline=None)
@given(TABLE_OPS)
def test_the_order_table_answers_as_the_reference_after_any_ops(
    ops: list[tuple[str, tuple[Any, ...]]],
) -> None:
    native, reference = NATIVE.table(), REFERENCE.table()
    for name, args in ops:
        if name == "add" and args[0] in reference:
            continue  # the caller checks first (the reference would keep a stale slot)
        assert _outcome(getattr(native, name), *args) == _outcome(getattr(reference, name), *args), (
            name,
            args,
        )
        assert len(native) == len(reference)
    assert sorted(native.items()) == sorted(reference.items())
    assert all((ref in native) == (ref in reference) for ref in (0, 1, 40, -1, U64, 2**64, "x"))


@needs_native
def test_the_order_table_grows_and_shrinks_through_many_collisions() -> None:
    native, reference = NATIVE.table(), REFERENCE.table()
    for ref in range(0, 30_000, 3):  # past several doublings
        native.add(ref, ref % 7, 1 + ref % 2, ref, ref + 1)
        reference.add(ref, ref % 7, 1 + ref % 2, ref, ref + 1)
    for ref in range(0, 30_000, 9):  # removals shift probe runs back
        native.remove(ref)
        reference.remove(ref)
    assert len(native) == len(reference) == 6_666
    assert all(native.get(ref) == reference.get(ref) for ref in range(0, 30_000))
    native.clear()
    assert len(native) == 0 and native.get(3) is None and list(native.items()) == []


@needs_native
def test_out_of_range_fields_are_refused_as_the_reference_refuses_them() -> None:
    for args in ((1, 0, 1, 2**32, 1), (1, 0, 1, 1, 2**32), (1, 2**32, 1, 1, 1), (1, 0, 1, -1, 1)):
        for store in (NATIVE, REFERENCE):
            with pytest.raises(OverflowError):
                store.table().add(*args)
    for ref in (-1, 2**64):  # the parser reads a u64; the C table takes nothing else
        with pytest.raises(OverflowError):
            NATIVE.table().add(ref, 0, 1, 1, 1)
    with pytest.raises(TypeError):
        NATIVE.table().add("1", 0, 1, 1, 1)
    table = NATIVE.table()
    with pytest.raises(KeyError):
        table.remove(5)
    with pytest.raises(KeyError):
        table.set_shares(5, 1)


@needs_native
def test_changing_the_table_while_iterating_it_is_refused() -> None:
    table = NATIVE.table()
    table.add(1, 0, 1, 10, 10)
    table.add(2, 0, 1, 10, 10)
    items = table.items()
    next(items)
    table.remove(2)
    with pytest.raises(RuntimeError):
        next(items)


MOVES = st.dictionaries(st.integers(1, 30), st.tuples(st.integers(-50, 50), st.integers(-2, 2)), max_size=3)
LEVEL_OPS = st.lists(st.tuples(st.integers(1, 30), st.integers(-50, 100), st.integers(-2, 2)), max_size=120)


@needs_native
@settings(max_examples=80, deadline=None)
@given(st.booleans(), LEVEL_OPS, st.integers(0, 12), MOVES)
def test_price_levels_show_the_reference_book_with_and_without_moves(
    is_bid: bool, ops: list[tuple[int, int, int]], depth: int, moves: dict[int, tuple[int, int]]
) -> None:
    native, reference = NATIVE.levels(is_bid=is_bid), REFERENCE.levels(is_bid=is_bid)
    for price, shares, orders in ops:
        native.move(price, shares, orders)
        reference.move(price, shares, orders)
        assert native.best(depth) == reference.best(depth)
    assert native.best(depth, moves) == reference.best(depth, moves)
    assert native.best(depth, {}) == reference.best(depth, {}) == reference.best(depth)
    assert len(native) == len(reference.keys) and native.sign == reference.sign


@needs_native
@given(st.tuples(*[st.integers(-(2**70), 2**70)] * 5))
def test_order_hash_is_the_references(args: tuple[int, int, int, int, int]) -> None:
    assert NATIVE.order_hash(*args) == REFERENCE.order_hash(*args)


@needs_native
def test_an_itch_day_gives_both_stores_one_state_and_the_same_blocks() -> None:
    capture = make_itch_capture(symbols=40, orders=3_000, seed=11)
    runs = []
    for native in (True, False):
        engine = Itch50Engine(depth=5, prefer_native=native)
        assert engine.mbo.store.is_native is native
        reasons: dict[str, int] = {}
        played = Played()
        for packet in packets(capture.data):
            for reason, count in convert(engine, packet, played).items():
                reasons[reason] = reasons.get(reason, 0) + count
        runs.append((engine, reasons, played))
    (
        (native_engine, native_reasons, native_played),
        (reference_engine, reference_reasons, reference_played),
    ) = runs
    assert len(native_played.blocks) > 100_000  # the day published, and byte for byte alike:
    assert native_played == reference_played
    native_state, reference_state = native_engine.mbo, reference_engine.mbo
    assert native_reasons == reference_reasons
    assert len(native_state.orders) == len(reference_state.orders) == capture.live_orders
    assert native_state.digest == reference_state.digest == native_state.recompute_digest()
    assert native_state.snapshot() == reference_state.snapshot()
    restored = MboState(5)
    restored.restore(reference_state.snapshot())
    assert restored.digest == reference_state.digest and sorted(restored.orders.items()) == sorted(
        reference_state.orders.items()
    )


FLOATS = st.one_of(
    st.sampled_from((0.0, -0.0, 1.5, 101.25)), st.floats(allow_nan=False, allow_infinity=False)
)
INT64 = st.integers(-(2**63), 2**63 - 1)
LEVELS = st.lists(st.tuples(FLOATS, FLOATS, st.integers(-5, 2**40)), max_size=6)
OPTIONAL = st.one_of(st.none(), FLOATS)


@st.composite
def book_values(draw: st.DrawFn) -> BookValues | None:
    if draw(st.integers(0, 5)) == 0:
        return None
    orders = draw(st.binary(max_size=40))
    book = MboBookValues(orders=orders) if draw(st.booleans()) else BookValues()
    book.level_indexed, book.bids, book.asks = draw(st.booleans()), draw(LEVELS), draw(LEVELS)
    for name in ("volume", "last", "high", "low", "open", "close", "settle", "open_interest", "vwap"):
        setattr(book, name, draw(OPTIONAL))
    book.notional, book.traded, book.trades = draw(FLOATS), draw(FLOATS), draw(INT64)
    return book


@st.composite
def block_symbols(draw: st.DrawFn) -> tuple[Any, ...]:
    values = SymbolValues(
        draw(INT64), draw(FLOATS), draw(FLOATS), draw(FLOATS), draw(FLOATS),
        draw(INT64), draw(FLOATS), draw(FLOATS), draw(FLOATS), draw(book_values()),
    )  # fmt: skip
    trades = draw(st.lists(st.tuples(FLOATS, st.integers(-(2**31), 2**31)), max_size=2))
    changes = draw(
        st.lists(
            st.builds(
                BookChange,
                st.integers(0, 3),
                st.integers(0, 2),
                st.integers(0, 2**32 - 1),
                FLOATS,
                FLOATS,
                INT64,
            ),
            max_size=4,
        )
    )
    return (draw(st.text(max_size=8)), trades, changes, values, draw(st.binary(max_size=34)))


@needs_native
@settings(max_examples=150, deadline=None)
@given(
    INT64,
    INT64,
    st.one_of(st.integers(0, 8), st.integers(0, 2**32 - 1)),
    st.lists(block_symbols(), max_size=3),
)
def test_the_c_block_encoder_writes_what_the_protobuf_runtime_writes(
    event_ns: int, publish_ns: int, depth: int, symbols: list[tuple[Any, ...]]
) -> None:
    written = NATIVE.encode_block(event_ns, publish_ns, depth, symbols)
    assert written == REFERENCE.encode_block(event_ns, publish_ns, depth, symbols)
    assert market_pb2.MarketUpdate.FromString(written).publish_time_ns == publish_ns


@needs_native
@settings(max_examples=150, deadline=None)
@given(block_symbols())
def test_the_c_symbol_digest_is_the_references(symbol: tuple[Any, ...]) -> None:
    name, _trades, _changes, values, _orders = symbol
    assert NATIVE.symbol_digest(name, values) == REFERENCE.symbol_digest(name, values)
    with pytest.raises(TypeError):
        NATIVE.symbol_digest(name, SymbolValues(volume=1.5))  # type: ignore[arg-type]


@needs_native
def test_the_c_block_encoder_refuses_what_is_not_a_block_without_harm() -> None:
    values = SymbolValues(book=BookValues())
    good = ("S", [], [], values, b"")
    for symbols in (
        [("S", [], [], values)],  # four parts
        [(b"S", [], [], values, b"")],  # a bytes symbol
        [("S", [(1.0, 1.5)], [], values, b"")],  # a float size
        [("S", [], [(1, 2, 3)], values, b"")],  # a short change
        [("S", [], [], object(), b"")],  # no values
        [("S", [], [], SymbolValues(volume=1.5), b"")],  # type: ignore[arg-type]  # a float volume
        [("S", [], [], values, "orders")],  # orders as text
        7,
    ):
        with pytest.raises((TypeError, AttributeError)):
            NATIVE.encode_block(1, 2, 10, symbols)
    assert NATIVE.encode_block(1, 2, 10, [good]) == REFERENCE.encode_block(1, 2, 10, [good])


@needs_native
def test_python_code_run_while_a_block_is_read_cannot_pull_the_book_from_under_it() -> None:
    class Shrinker:  # a price whose conversion empties the side being read
        def __init__(self, side: list[Any]) -> None:
            self.side = side

        def __float__(self) -> float:
            self.side.clear()
            return 1.0

    bids: list[Any] = []
    bids += [(Shrinker(bids), 1.0, 1), *[(float(p), 1.0, 1) for p in range(2, 40)]]
    book = BookValues(bids=bids)
    values = SymbolValues(book=book)
    # read from a snapshot of the side; at depth 50 all 39 levels are shown
    written = NATIVE.encode_block(1, 2, 50, [("S", [], [], values, b"")])
    assert len(market_pb2.MarketUpdate.FromString(written).symbols[0].state.book.bids) == 39
    bids += [(Shrinker(bids), 1.0, 1), (2.0, 1.0, 1)]
    assert isinstance(NATIVE.symbol_digest("S", values), int)


def test_without_the_extension_the_reference_serves_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(choice, "ORDERS_NOT_BUILT", "the C extension ... is not built (test)")
    choice._warn_orders_fallback.cache_clear()
    try:
        with caplog.at_level("WARNING", logger=choice.__name__):
            stores = [MboState().store for _ in range(3)]
    finally:
        choice._warn_orders_fallback.cache_clear()
    assert not any(store.is_native for store in stores)
    warned = [r.getMessage() for r in caplog.records if "itch50 order table" in r.getMessage()]
    assert len(warned) == 1 and "is not built (test)" in warned[0]
