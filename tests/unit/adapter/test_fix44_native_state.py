"""fix44's state in C (``_orders.BookTable``, ``NativeBookState``) against ``BookState`` in Python.

``test_fix44_run.py`` plays streams through both engines and compares what they publish and
keep at the end. Here: streams in which the C run makes every symbol's record (no opening
refresh), with the Python path's messages (``35=W``, heartbeats, session messages, every
error) between its runs, compared message by message -- block, digest and the whole state's
snapshot after each; the symbol limit; the table's own interface (what goes in comes out, a
record is replaced whole or not at all, hostile values are refused); and its memory.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedha.adapter.conversion.book import BookValues
from feedha.adapter.conversion.codec import from_proto, to_proto
from feedha.adapter.conversion.state import SymbolValues, symbol_digest
from feedha.adapter.formats.fix44.engine import Fix44Engine
from feedha.proto import fix
from tests.unit.adapter.test_fix44_run import GRID, SIZES, TIMES, Played, _x, convert, messages, needs_native

NEW_SYMBOLS = ("AAA", "BB", "C.D", "E")


def _same_after(native: Fix44Engine, reference: Fix44Engine) -> None:
    assert native.state.digest == reference.state.digest == native.state.recompute_digest()
    assert native.state.snapshot() == reference.state.snapshot()
    assert len(native.state) == len(reference.state)


@st.composite
def first_messages(draw: Any, seq: int) -> bytes:
    """An incremental refresh that may name symbols never seen: level-indexed (1023) or price-keyed."""
    entries: list[tuple[int, Any]] = []
    count = draw(st.integers(1, 4))
    for _ in range(count):
        symbol = draw(st.sampled_from(NEW_SYMBOLS))
        kind = draw(st.sampled_from("0101012BC4"))
        entries += [(279, draw(st.sampled_from("0001"))), (269, kind), (55, symbol)]
        if kind in "01" and (symbol == "BB") != draw(st.sampled_from([False] * 9 + [True])):
            entries.append((1023, draw(st.sampled_from(("1", "2", "3", "4")))))
        if kind not in "BC":
            entries.append((270, draw(st.sampled_from(GRID + ("0", "-0")))))
        if kind in "012BC":
            entries.append((271, draw(st.sampled_from(SIZES[:5]))))
    head: list[tuple[int, Any]] = [(35, "X"), (49, "V"), (56, "F"), (34, seq), (52, TIMES[0]), (268, count)]
    return fix.encode_message(head + entries)


def _session_message(seq: int, kind: str) -> bytes:
    fields: list[tuple[int, Any]] = [(35, kind), (49, "V"), (56, "F"), (34, seq), (52, TIMES[0])]
    if kind == "h":
        fields += [(340, "2")]
    return fix.encode_message(fields)


@st.composite
def mixed_streams(draw: Any) -> list[bytes]:
    """No opening: first refreshes made in C, with W, heartbeats, session messages and errors between."""
    stream = []
    for seq in range(1, 1 + draw(st.integers(1, 30))):
        choice = draw(st.sampled_from(("first",) * 6 + ("any", "any", "session")))
        if choice == "first":
            stream.append(draw(first_messages(seq)))
        elif choice == "any":
            stream.append(draw(messages(seq)))  # X, W or a heartbeat, sometimes malformed
        else:
            stream.append(_session_message(seq, draw(st.sampled_from("A5h1"))))
    return stream


@needs_native
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_streams(), st.integers(1, 4))
def test_records_made_in_c_and_the_python_paths_messages_agree_message_by_message(
    stream: list[bytes], depth: int
) -> None:
    engines = [Fix44Engine(depth=depth, prefer_native=n) for n in (True, False)]
    play_both(engines, stream, after_each=_same_after)


def play_both(engines: list[Fix44Engine], stream: list[bytes], *, after_each: Any = None) -> None:
    """Each message through both engines: the same blocks, digests and refusals after every one."""
    plays, reasons = [Played(), Played()], [{}, {}]  # type: ignore[var-annotated]
    for message in stream:
        for engine, played, seen in zip(engines, plays, reasons, strict=True):
            for reason, count in convert(engine, message, played).items():
                seen[reason] = seen.get(reason, 0) + count
        assert plays[0] == plays[1] and reasons[0] == reasons[1]
        if after_each is not None:
            after_each(*engines)


@needs_native
def test_the_c_run_makes_a_new_symbols_record_and_the_python_path_reads_it() -> None:
    engines = [Fix44Engine(depth=3, prefer_native=n) for n in (True, False)]
    frame = b"".join(
        [
            _x(1, ("0", "0", "NEW", "10", "1"), ("0", "1", "NEW", "11", "2"), ("0", "2", "NEW", "10.5", "3")),
            _x(2, ("0", "0", "NEW", "9", "4"), ("0", "0", "OTHER", "5", "5")),
        ]
    )
    refresh = fix.encode_message(
        [(35, "W"), (34, 3), (52, TIMES[0]), (55, "NEW"), (268, 1), (269, "1"), (270, "12"), (271, "7")]
        + [(278, "\u00e9")]  # an MDEntryID of non-ASCII text: the Python path's (the C run reads ASCII)
    )
    plays = []
    for engine in engines:
        played = Played()
        assert convert(engine, frame + refresh, played) == {}
        plays.append(played)
    assert plays[0] == plays[1] and plays[0].from_runs == 2  # both X in C; the W in Python
    _same_after(*engines)
    values = engines[0].state.get("NEW")
    assert values is not None and values.book is not None
    assert values.book.asks == [(12.0, 7.0, 0)] and values.book.bids == []  # a W: exactly its entries
    assert values.book.last == 10.5 and values.trade_count == 1


@needs_native
def test_a_symbol_past_the_limit_stops_the_run_and_is_the_python_paths_symbol_limit() -> None:
    engines = [Fix44Engine(prefer_native=n) for n in (True, False)]
    frame = b"".join(_x(seq, ("0", "0", name, "10", "1")) for seq, name in enumerate(("A", "B", "C", "A"), 1))
    plays = []
    for engine in engines:
        engine.state.max_symbols = 2
        played = Played()
        assert convert(engine, frame, played) == {"symbol_limit": 1}
        plays.append(played)
    assert plays[0] == plays[1] and plays[0].from_runs == 3
    assert engines[0].state.max_symbols == 2 and sorted(engines[0].state.snapshot()) == ["A", "B"]
    _same_after(*engines)


def _book(**changes: Any) -> BookValues:
    book = BookValues(False, [(10.0, 1.0, 2), (9.5, -0.0, 0)], [(11.0, 3.0, 1)], volume=4.0, last=10.0)
    for name, value in changes.items():
        setattr(book, name, value)
    return book


@needs_native
def test_what_a_state_adopts_comes_out_as_it_went_in_under_the_same_digest() -> None:
    reference = Fix44Engine(prefer_native=False).state
    native = Fix44Engine().state
    adopted = {
        "A": SymbolValues(4, 10.0, 10.0, 10.0, 10.0, 1, 10.0, 11.0, 40.0, book=_book()),
        "B": SymbolValues(book=_book(level_indexed=True, asks=[], settle=-0.0)),
        "C": SymbolValues(volume=7, last=3.5),  # no book at all
        "D": SymbolValues(book=_book(bids=[(1.0, 2.0, 9_999_999_999_999_999_999)])),  # 19 digits of 346
    }
    for state in (reference, native):
        state.restore(adopted, session=3)
    assert native.snapshot() == reference.snapshot() == adopted
    assert native.digest == reference.digest == native.recompute_digest()
    for symbol, values in adopted.items():
        assert (
            native.symbol_digest(symbol) == symbol_digest(symbol, values) == reference.symbol_digest(symbol)
        )
    assert list(native.snapshot()) == ["A", "B", "C", "D"]  # in the order they came
    assert from_proto(to_proto(adopted["A"])) == native.get("A")
    native.roll(4)
    reference.roll(4)
    assert native.snapshot() == reference.snapshot() and native.digest == reference.digest
    assert "A" in native and "Z" not in native and 5 not in native and len(native) == 4
    assert repr(native) == f"<NativeBookState [symbols=4, session=4, digest={native.digest:016x}]>"


@needs_native
@pytest.mark.parametrize(
    "book",
    [
        [(1.0, 2.0)],  # a level of two
        [(1.0, 2.0, 3.5)],  # orders not an int
        [(1.0, "x", 3)],  # a size that is no number
        [None],
        "not levels",
    ],
)
def test_a_hostile_book_is_refused_and_the_record_stays_as_it_was(book: Any) -> None:
    state = Fix44Engine().state
    good = SymbolValues(book=_book())
    state.set_symbol("A", good)
    digest = state.digest
    bad = SymbolValues(book=_book(bids=book))
    with pytest.raises((TypeError, ValueError)):
        state.set_symbol("A", bad)
    with pytest.raises((TypeError, ValueError)):
        state.set_symbol("NEW", bad)
    assert state.digest == digest and state.snapshot() == {"A": good}


@needs_native
def test_the_tables_settings_are_checked() -> None:
    table = Fix44Engine().state.native  # type: ignore[attr-defined]
    for name, bad in (("depth", -1), ("depth", 10**7), ("max_symbols", -1)):
        with pytest.raises(ValueError, match=name):
            setattr(table, name, bad)
    with pytest.raises(TypeError):
        table.get(5)
    with pytest.raises(ValueError):
        table.set("A", (1, 2), None)  # not nine values
    with pytest.raises(OverflowError):
        table.salt = -1


@needs_native
def test_a_table_frees_what_it_held() -> None:
    engine = Fix44Engine(depth=4)
    messages = [
        _x(seq, ("0", "0", f"S{seq}", str(seq), "1"), ("0", "1", f"S{seq}", str(seq + 1), "1"))
        for seq in range(1, 2001)
    ]
    frame = b"".join(messages)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        assert convert(engine, frame, Played()) == {}
        held = tracemalloc.get_traced_memory()[0] - before
        assert len(engine.state) == 2000 and held > 2000 * 64
        engine.state.restore({})
        freed = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert freed < held / 4 and engine.state.digest == 0, (held, freed)


@needs_native
def test_a_book_that_comes_and_goes_holds_no_more_memory() -> None:
    engine = Fix44Engine(depth=4)
    opening = b"".join(_x(1 + k, ("0", "0", "A", str(100 + k), "1")) for k in range(200))
    closing = b"".join(_x(201 + k, ("2", "0", "A", str(100 + k), "")) for k in range(200))
    assert convert(engine, opening + closing, Played()) == {}
    # Only what is allocated from this file's lines counts (the C run's allocations are traced
    # to the line that called it): a thread another test left behind allocates meanwhile too.
    here = [tracemalloc.Filter(True, __file__)]
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces(here)
        for _ in range(20):
            assert engine.run_function()(opening, 0, 0, 0, 1 << 30, 1 << 20, 1, 1, True, False)[1] == 200
            assert engine.run_function()(closing, 0, 0, 0, 1 << 30, 1 << 20, 1, 1, True, False)[1] == 200
        after = tracemalloc.take_snapshot().filter_traces(here)
    finally:
        tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert grown < 16 * 1024, grown


FLOATS = st.one_of(st.sampled_from((0.0, -0.0, 1.5, 101.25)), st.floats(allow_infinity=False))
INT64 = st.integers(-(2**63), 2**63 - 1)
# Orders as the parser gives them (0 up to 19 digits): the table keeps their 64 bits.
LEVELS = st.lists(st.tuples(FLOATS, FLOATS, st.integers(0, 2**64 - 1)), max_size=6)


@st.composite
def any_values(draw: Any) -> SymbolValues:
    """Any values a state may adopt (a peer's image, a snapshot): NaNs and signed zeros among them."""
    values = SymbolValues(*[draw(INT64 if i in (0, 5) else FLOATS) for i in range(9)])  # type: ignore[arg-type]
    if draw(st.integers(0, 5)):
        book = values.book = BookValues(draw(st.booleans()), draw(LEVELS), draw(LEVELS))
        for name in ("volume", "last", "high", "low", "open", "close", "settle", "open_interest", "vwap"):
            setattr(book, name, draw(st.one_of(st.none(), FLOATS)))
        book.notional, book.traded, book.trades = draw(FLOATS), draw(FLOATS), draw(INT64)
    return values


def _bits(values: SymbolValues) -> bytes:
    return repr(values).encode()  # a NaN is not equal to itself; its repr is


@needs_native
@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(NEW_SYMBOLS + ("", "é", "x" * 300)), any_values(), max_size=5))
def test_any_values_adopted_come_back_under_the_digest_python_gives_them(
    adopted: dict[str, SymbolValues],
) -> None:
    native = Fix44Engine().state
    native.restore(adopted, session=2)
    assert {s: _bits(v) for s, v in native.snapshot().items()} == {s: _bits(v) for s, v in adopted.items()}
    for symbol, values in adopted.items():
        assert native.symbol_digest(symbol) == symbol_digest(symbol, values)
    assert native.digest == native.recompute_digest()


@needs_native
def test_a_new_level_indexed_book_is_made_by_the_c_run() -> None:
    engines = [Fix44Engine(depth=2, prefer_native=n) for n in (True, False)]
    frame = b"".join(
        [
            _x(
                1,
                ("0", "0", "L", "10", "1", "1"),
                ("0", "0", "L", "9", "1", "2"),
                ("0", "1", "L", "11", "2", "1"),
            ),
            _x(2, ("0", "0", "L", "10.5", "3", "1")),  # pushes 9 past the depth
        ]
    )
    plays = []
    for engine in engines:
        played = Played()
        assert convert(engine, frame, played) == {}
        plays.append(played)
    assert plays[0] == plays[1] and plays[0].from_runs == 2
    _same_after(*engines)
    book = engines[0].state.get("L").book  # type: ignore[union-attr]
    assert book is not None and book.level_indexed and book.bids == [(10.5, 3.0, 0), (10.0, 1.0, 0)]


# Messages that change a book in every way a run undoes -- a level replaced, inserted (pushing one
# past the depth), deleted, a session value set -- each stopped after it applied, by the packet's room.
UNDONE = (
    _x(9, ("1", "0", "AAA", "10", "7"), ("0", "2", "AAA", "10", "5")),  # a Change of a price held, a trade
    _x(9, ("0", "0", "AAA", "9", "1"), ("0", "1", "AAA", "12", "1")),  # New prices
    _x(9, ("2", "0", "AAA", "10", ""), ("0", "B", "AAA", "", "99")),  # a Delete, the volume
    _x(9, ("1", "0", "LVL", "20", "2", "1"), ("0", "1", "LVL", "22", "2", "1")),  # level changed, inserted
    _x(9, ("0", "0", "LVL", "21", "2", "1")),  # inserted at 1: the deepest falls off
    _x(9, ("2", "0", "LVL", "20", "2", "1"), ("2", "1", "LVL", "21", "1", "1")),  # deleted
)


@needs_native
@pytest.mark.parametrize("message", UNDONE)
def test_a_message_stopped_after_it_applied_leaves_the_state_exactly_as_it_was(message: bytes) -> None:
    engine = Fix44Engine(depth=2)
    opening = b"".join(
        [
            _x(1, ("0", "0", "AAA", "10", "1"), ("0", "0", "AAA", "9.5", "1"), ("0", "1", "AAA", "11", "2")),
            _x(2, ("0", "0", "LVL", "20", "1", "1"), ("0", "0", "LVL", "19", "1", "2")),
            _x(3, ("0", "1", "LVL", "21", "1", "1"), ("0", "1", "LVL", "23", "1", "2")),
        ]
    )
    assert convert(engine, opening, Played()) == {}
    before, digest = engine.state.snapshot(), engine.state.digest
    run = engine.run_function()
    assert run(message, 0, 0, 0, 1, 1 << 20, 1, 1, True, False)[:3] == (0, 0, 2)  # STOP_ROOM: no room
    assert (
        engine.state.snapshot() == before and engine.state.digest == digest == engine.state.recompute_digest()
    )
    reference = Fix44Engine(depth=2, prefer_native=False)
    assert convert(reference, opening, Played()) == {}
    plays = [Played(), Played()]
    assert convert(engine, message, plays[0]) == convert(reference, message, plays[1]) == {}
    assert plays[0] == plays[1] and plays[0].from_runs == 1
    _same_after(engine, reference)
