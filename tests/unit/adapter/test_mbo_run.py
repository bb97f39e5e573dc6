"""The itch50 C run (``_orders.MboRun``) against the Python loop it replaces, message for message.

The reference is the engine on the Python order store (``prefer_native=False``): its runs are
``LoopEngine.run`` over ``MboState.stage``/``commit`` and ``Itch50Engine.encode_staged``.
The C run stops at other places (a new symbol, a message that moves nothing, an error), so the
two are compared on what a play publishes -- every message's block and the digest after it,
whether a run or the careful path converted it -- and on the state left behind. The messages
are written from the specification's layouts (``test_itch50``), not by the code under test.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedha.adapter.conversion import choice
from feedha.adapter.conversion.book import BookValues
from feedha.adapter.conversion.state import SymbolValues
from feedha.adapter.formats.itch50.day import make_itch_capture
from feedha.adapter.formats.itch50.engine import Itch50Engine
from feedha.proto import moldudp64
from tests.itch50_feed import Played, convert, packets

from .test_itch50 import (
    add_order,
    cancel,
    cross,
    delete,
    directory,
    executed,
    executed_with_price,
    replace,
    system_event,
    trade,
)

needs_native = pytest.mark.skipif(
    choice.make_order_store().run is None, reason="adapter.conversion._orders is not built"
)

REFS = st.integers(1, 24)  # few references: adds collide, executions and deletes find them
SHARES = st.one_of(st.integers(0, 400), st.just(2**32 - 1))
PRICES = st.sampled_from((1, 9_999, 10_000, 10_050, 10_100, 2**32 - 1))  # few prices: levels collide
STOCKS = st.sampled_from((b"AAA", b"BB", b"ZZZ", b"C\xe9", b"", b"DDDDDDDD"))  # ZZZ: no directory
SIDES = st.sampled_from((b"B", b"S", b"B", b"S", b"X"))
MESSAGE = st.one_of(
    st.builds(add_order, REFS, SIDES, SHARES, STOCKS, PRICES, mpid=st.booleans()),
    st.builds(executed, REFS, SHARES),
    st.builds(executed_with_price, REFS, SHARES, st.sampled_from((b"Y", b"N", b"?")), PRICES),
    st.builds(cancel, REFS, SHARES),
    st.builds(delete, REFS),
    st.builds(replace, REFS, REFS, SHARES, PRICES),
    st.builds(trade, REFS, SIDES, SHARES, STOCKS, PRICES),
    st.builds(cross, st.one_of(SHARES, st.integers(2**32, 2**64 - 1)), STOCKS, PRICES),  # Q's shares: u64
    st.builds(directory, STOCKS),
    st.just(system_event()),
    st.builds(lambda m, cut: m[:cut], st.builds(delete, REFS), st.integers(0, 18)),  # truncated
    st.just(b"~" + bytes(18)),  # a type the specification does not define
)
OPENING = [directory(b"AAA"), directory(b"BB"), directory(b"DDDDDDDD"), directory(b"")]


def _play(engine: Itch50Engine, messages: list[bytes], per_packet: int) -> tuple[Played, dict[str, int]]:
    played, reasons = Played(), {}
    for start in range(0, len(messages), per_packet):
        packet = moldudp64.encode_packet("T", start + 1, messages[start : start + per_packet])
        for reason, count in convert(engine, packet, played).items():
            reasons[reason] = reasons.get(reason, 0) + count
    return played, reasons


def _same_state(native: Itch50Engine, reference: Itch50Engine) -> None:
    assert native.mbo.digest == reference.mbo.digest == native.mbo.recompute_digest()
    assert native.mbo.snapshot() == reference.mbo.snapshot()
    assert sorted(native.mbo.orders.items()) == sorted(reference.mbo.orders.items())


@needs_native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(MESSAGE, min_size=1, max_size=120),
    st.integers(1, 4),
    st.integers(2, 30),
    st.integers(1, 25),
)
def test_random_streams_publish_the_same_blocks_and_leave_the_same_state(
    messages: list[bytes], depth: int, max_orders: int, per_packet: int
) -> None:
    engines = [Itch50Engine(depth=depth, max_orders=max_orders, prefer_native=n) for n in (True, False)]
    assert [engine.is_native for engine in engines] == [True, False]
    (native, native_reasons), (reference, reference_reasons) = (
        _play(engine, OPENING + messages, per_packet) for engine in engines
    )
    assert native == reference and native_reasons == reference_reasons
    _same_state(*engines)


@needs_native
def test_a_day_runs_in_c_and_publishes_what_the_python_loop_publishes() -> None:
    capture = make_itch_capture(symbols=60, orders=4_000, seed=5, book_only=True)
    engines = [Itch50Engine(depth=3, prefer_native=n) for n in (True, False)]
    plays = []
    for engine in engines:
        played = Played()
        for packet in packets(capture.data, per_packet=30):
            assert convert(engine, packet, played) == {}
        plays.append(played)
    assert plays[0] == plays[1] and len(plays[0].digests) // 8 > 8_000
    # The C run took every message but the directory message that names a new symbol (P, Q and
    # the other directory messages included): the careful path took those 60.
    assert plays[0].from_runs == plays[1].from_runs - 60
    _same_state(*engines)


@needs_native
def test_trades_crosses_and_directory_messages_of_a_known_symbol_run_in_c() -> None:
    opening = [directory(b"AAA"), add_order(1, b"B", 100, b"AAA", 10_000)]
    messages = [
        trade(0, b"B", 300, b"AAA", 10_100),
        trade(0, b" ", 2**32 - 1, b"AAA", 2**32 - 1),  # P's side may be blank
        cross(200, b"AAA", 10_050),
        cross(2**32 - 1, b"AAA", 1),
        directory(b"AAA"),  # again: a block with the values unchanged
        executed(1, 40),
        cross(2**32, b"AAA", 5),  # past a u32: the Python path's arithmetic
        cross(0, b"AAA", 0),
        trade(0, b"S", 1, b"ZZZ", 10_000),  # a symbol never seen: the Python path interns it
    ]
    engines = [Itch50Engine(depth=2, prefer_native=n) for n in (True, False)]
    plays = []
    for engine in engines:
        convert(engine, moldudp64.encode_packet("T", 1, opening))
        played = Played()
        assert convert(engine, moldudp64.encode_packet("T", 3, messages), played) == {}
        plays.append(played)
    assert plays[0] == plays[1] and plays[0].from_runs == 7
    _same_state(*engines)
    values = engines[0].mbo.peek("AAA")
    assert values is not None and values.book is not None
    assert values.trade_count == 7 and values.volume == 300 + 2**32 - 1 + 200 + 2**32 - 1 + 40 + 2**32


def _orders_frame(first_seq: int) -> bytes:
    """A record frame of A E X D U messages only, on symbols both engines know."""
    messages = [
        add_order(1, b"B", 100, b"AAA", 10_000),
        add_order(2, b"S", 50, b"AAA", 10_100),
        add_order(3, b"B", 70, b"BB", 9_999),
        executed(1, 30),
        cancel(2, 10),
        replace(3, 4, 80, 10_000),
        executed_with_price(1, 5, b"Y", 10_050),
        delete(4),
        add_order(5, b"S", 1, b"BB", 2**32 - 1, mpid=True),
    ]
    return moldudp64.records_of(moldudp64.decode_packet(moldudp64.encode_packet("T", first_seq, messages)))


@needs_native
@pytest.mark.parametrize(
    ("expect_seq", "stop_seq", "room", "max_count", "publish", "payloads"),
    [
        (0, 0, 1 << 20, 1 << 20, True, True),  # the whole frame
        (3, 0, 1 << 20, 1 << 20, True, False),  # the first record is not the one expected
        (0, 7, 1 << 20, 1 << 20, True, True),  # stops before a position the sync rules watch
        (0, 0, 300, 1 << 20, True, False),  # the packet fills
        (0, 0, -40, 1 << 20, True, False),  # an empty packet takes its first block whatever its size
        (0, 0, 1 << 20, 4, True, True),  # at most four
        (0, 0, 0, 1 << 20, False, False),  # a backup that only converts
    ],
)
def test_the_run_contract_is_the_python_loops(
    expect_seq: int, stop_seq: int, room: int, max_count: int, publish: bool, payloads: bool
) -> None:
    frame = _orders_frame(first_seq=1)
    results: list[Any] = []
    engines = [Itch50Engine(depth=2, prefer_native=n) for n in (True, False)]
    for engine in engines:
        convert(engine, moldudp64.encode_packet("T", 100, [directory(b"AAA"), directory(b"BB")]))
        results.append(engine.run(frame, 0, expect_seq, stop_seq, room, max_count, 77, 3, publish, payloads))
    assert results[0] == results[1]
    assert results[0][1] > 0 or expect_seq == 3  # it converted something (but for the wrong first record)
    _same_state(*engines)


@needs_native
def test_values_of_another_type_go_to_the_python_path_and_come_out_the_same() -> None:
    # An image from another implementation may carry an int where we keep a float: the C run
    # hands such a symbol to the Python path rather than do its arithmetic otherwise.
    engines = [Itch50Engine(depth=3, prefer_native=n) for n in (True, False)]
    plays = []
    for engine in engines:
        convert(
            engine,
            moldudp64.encode_packet("T", 1, [directory(b"AAA"), add_order(1, b"B", 100, b"AAA", 10_000)]),
        )
        values = engine.mbo.snapshot()
        assert values["AAA"].book is not None
        values["AAA"].book.volume = 5  # an int, not a float
        engine.mbo.restore(values)
        played = Played()
        assert (
            convert(engine, moldudp64.encode_packet("T", 3, [executed(1, 10), executed(1, 20)]), played) == {}
        )
        plays.append(played)
    assert plays[0] == plays[1] and plays[0].from_runs == 0
    _same_state(*engines)


@needs_native
def test_a_state_that_is_not_an_mbo_state_is_refused_not_crashed() -> None:
    engine = Itch50Engine(depth=3)
    frame = _orders_frame(first_seq=1)
    engine.mbo._values = []  # type: ignore[assignment]
    with pytest.raises(TypeError, match="_values"):
        engine.run(frame, 0, 0, 0, 1 << 20, 1 << 20, 1, 1, True, False)
    engine.mbo._values = {}
    with pytest.raises(ValueError, match="out of range"):
        engine.run(frame, len(frame) + 1, 0, 0, 1 << 20, 1 << 20, 1, 1, True, False)


@needs_native
def test_the_values_live_in_c_records_and_python_reads_them_as_objects() -> None:
    # The run converts on the records (MboRun.symbol_map): Python reads a symbol's values as a
    # SymbolValues built when asked and kept until the run changes the symbol again.
    capture = make_itch_capture(symbols=20, orders=600, seed=11, book_only=True)
    engines = [Itch50Engine(depth=3, prefer_native=n) for n in (True, False)]
    for engine in engines:
        for packet in packets(capture.data, per_packet=25):
            assert convert(engine, packet) == {}
    native, reference = (engine.mbo for engine in engines)
    symbols = native._values
    assert type(symbols).__name__ == "SymbolMap" and symbols.native_count() == len(native) == 20
    first = native.peek("AAAA")
    assert first is not None and first is native.peek("AAAA") and first == reference.peek("AAAA")
    assert type(first) is SymbolValues and type(first.book) is BookValues
    assert list(symbols.keys()) == list(reference._values.keys())
    assert native.symbol_digest("AAAA") == reference.symbol_digest("AAAA")
    bids = [
        (price, ref)
        for ref, symbol, side, price, _ in native.orders.items()
        if native._names[symbol] == "AAAA" and side == 1
    ]
    order = max(bids)[1]  # at the best bid: its delete changes the shown book
    convert(engines[0], moldudp64.encode_packet("TEST", capture.messages + 1, [delete(order)]))
    after = native.peek("AAAA")
    assert after is not None and after is not first and after.book != first.book


@needs_native
def test_the_symbol_map_is_the_mapping_the_state_used() -> None:
    symbols = choice.make_order_store().symbol_map(SymbolValues, BookValues)  # type: ignore[misc]
    odd = SymbolValues(volume=2**70, book=BookValues(bids=[(1, 2.0, 3)]))  # kept as Python's object
    plain = SymbolValues(volume=5, high=1.5, book=BookValues(bids=[(1.0, 2.0, 3)], last=1.0))
    symbols["B"], symbols["A"] = odd, plain
    assert list(symbols) == symbols.keys() == ["B", "A"] and len(symbols) == 2 and "A" in symbols
    assert symbols["B"] is odd and symbols.get("A") is plain and symbols.get("Z", 7) == 7
    assert symbols.native_count() == 1 and symbols.hash_of("A") == 0 and symbols.hash_of("Z") is None
    symbols.set_hash("A", 2**64 - 1)
    assert symbols.hash_of("A") == 2**64 - 1 and symbols.items() == [("B", odd), ("A", plain)]
    with pytest.raises(KeyError):
        symbols["Z"]
    with pytest.raises(KeyError):
        symbols.set_hash("Z", 1)
    with pytest.raises(TypeError):
        del symbols["A"]
    with pytest.raises(TypeError):
        symbols[b"A"] = plain  # type: ignore[index]
