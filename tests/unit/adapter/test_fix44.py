"""fix44: the data dictionary, the parser, order books and session values (docs/converters.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.config import AdapterConfig
from feedha.adapter.conversion.book import BookValues
from feedha.adapter.conversion.codec import from_proto, to_proto
from feedha.adapter.errors import ConfigError, ConversionError
from feedha.adapter.formats.fix44.engine import BookState, Fix44Engine
from feedha.adapter.formats.fix44.parser import SKIPPED
from feedha.adapter.formats.fix44.securities import load_securities
from feedha.proto import fix, market_pb2
from tests.fix44_capture import Reference, make_capture

HEAD: list[tuple[int, Any]] = [(49, "V"), (56, "F"), (52, "20260105-14:30:00.000")]


def _x(seq: int, *entries: list[tuple[int, Any]]) -> bytes:
    body: list[tuple[int, Any]] = [(35, "X"), *HEAD, (34, seq), (268, len(entries))]
    for entry in entries:
        body += entry
    return fix.encode_message(body)


def _w(seq: int, symbol: str, *entries: list[tuple[int, Any]]) -> bytes:
    body: list[tuple[int, Any]] = [(35, "W"), *HEAD, (34, seq), (55, symbol), (268, len(entries))]
    for entry in entries:
        body += entry
    return fix.encode_message(body)


def _body(message: bytes) -> bytes:
    body, _end = fix.next_message(message, 0)
    assert body is not None
    return body


def _apply(engine: Fix44Engine, *messages: bytes) -> None:
    for message in messages:
        engine.state.apply(engine.parse(_body(message)))


def _book(engine: Fix44Engine, symbol: str) -> BookValues:
    values = engine.state.get(symbol)
    assert values is not None and values.book is not None
    return values.book


def _sides(engine: Fix44Engine, symbol: str) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    book, depth = _book(engine, symbol), engine.depth
    return [(p, s) for p, s, _o in book.bids[:depth]], [(p, s) for p, s, _o in book.asks[:depth]]


def _level(action: int, side: str, level: int, price: str = "", size: int = 0) -> list[tuple[int, Any]]:
    entry: list[tuple[int, Any]] = [(279, action), (269, side), (55, "L"), (1023, level)]
    return entry + ([(270, price), (271, size)] if action != 2 else [])


def test_a_level_indexed_book_inserts_shifts_and_drops_past_the_depth_for_good() -> None:
    engine = Fix44Engine(depth=3)
    _apply(
        engine, _x(1, _level(0, "0", 1, "100", 1), _level(0, "0", 1, "101", 2), _level(0, "0", 1, "102", 3))
    )
    assert _sides(engine, "L")[0] == [(102, 3), (101, 2), (100, 1)]
    _apply(engine, _x(2, _level(0, "0", 2, "101.5", 9)))  # 100 is pushed past level 3: gone
    assert _sides(engine, "L")[0] == [(102, 3), (101.5, 9), (101, 2)]
    _apply(engine, _x(3, _level(2, "0", 1), _level(1, "0", 2, "101.00", 7)))
    assert _sides(engine, "L")[0] == [(101.5, 9), (101, 7)]  # the fallen level does not come back


def _keyed(action: int, side: str, price: str, size: int = 0) -> list[tuple[int, Any]]:
    entry: list[tuple[int, Any]] = [(279, action), (269, side), (55, "P"), (270, price)]
    return entry + ([(271, size)] if action != 2 else [])


def test_a_price_keyed_book_keeps_every_price_and_shows_the_best() -> None:
    engine = Fix44Engine(depth=2)
    _apply(engine, _x(1, *[_keyed(0, "1", f"{100 + i}.0", i + 1) for i in range(4)]))
    assert _sides(engine, "P")[1] == [(100, 1), (101, 2)]
    _apply(engine, _x(2, _keyed(2, "1", "100.000"), _keyed(1, "1", "101.50", 5)))
    assert _sides(engine, "P")[1] == [(101, 2), (101.5, 5)]  # deleting the best brings the next in view
    _apply(engine, _x(3, _keyed(1, "1", "101.5000", 6), _keyed(2, "1", "101")))
    assert _sides(engine, "P")[1] == [(101.5, 6), (102, 3)]


def test_session_values_of_incremental_and_full_refreshes() -> None:
    engine = Fix44Engine()
    trade: list[tuple[int, Any]] = [(279, 0), (269, "2"), (55, "T"), (270, "10"), (271, 100)]
    _apply(engine, _x(1, trade, [(279, 0), (269, "2"), (270, "12.5"), (271, 300)]))
    book = _book(engine, "T")
    assert (book.last, book.volume, book.high, book.low) == (12.5, 400, 12.5, 10)
    assert book.vwap == pytest.approx((1000 + 3750) / 400)
    assert (book.open, book.close, book.settle) == (None, None, None)  # never set: absent
    _apply(engine, _x(2, [(279, 0), (269, "7"), (55, "T"), (270, "11")], [(279, 0), (269, "8"), (270, "9")]))
    assert (_book(engine, "T").high, _book(engine, "T").low) == (12.5, 9)  # only when beyond
    _apply(
        engine,
        _w(
            3, "T", [(269, "2"), (270, "13"), (271, 50)], [(269, "4"), (270, "9.5")], [(269, "B"), (271, 999)]
        ),
    )
    book = _book(engine, "T")
    assert (book.last, book.open, book.volume) == (13, 9.5, 999)  # a trade in a W is not a new trade
    assert book.vwap == pytest.approx((1000 + 3750) / 400)  # VWAP survives it
    assert (book.bids, book.asks) == ([], [])  # the W had no book entries: the book is empty


def test_a_full_refresh_makes_the_book_exactly_its_entries() -> None:
    engine = Fix44Engine()
    _apply(engine, _x(1, _keyed(0, "0", "99", 5), _keyed(0, "1", "101", 5)))
    _apply(engine, _w(2, "P", [(269, "0"), (270, "98"), (271, 1)], [(269, "0"), (270, "98.5"), (271, 2)]))
    assert _sides(engine, "P") == ([(98.5, 2), (98, 1)], [])


def test_a_message_touching_many_symbols_is_one_block_and_applies_whole() -> None:
    engine = Fix44Engine()
    message = _x(1, _keyed(0, "0", "99", 5), [(279, 0), (269, "1"), (55, "Q"), (270, "7"), (271, 1)])
    frame = message + _x(
        2, _keyed(0, "0", "98", 1), [(279, 0), (269, "0"), (55, "Q"), (270, "oops"), (271, 1)]
    )
    pos, count, stop, _blocks, first, _digests, payloads = engine.run(
        frame, 0, 0, 0, -8192, 10, 1, 1, True, True
    )
    assert (count, first, stop) == (1, 1, 1)  # the second message stops the run (careful path)
    assert payloads is not None
    update = market_pb2.MarketUpdate.FromString(payloads[0])
    assert update.symbol == "" and [u.symbol for u in update.symbols] == ["P", "Q"]
    assert update.symbols[0].book_changes[0].action == market_pb2.BOOK_ACTION_INSERTED
    digest = engine.state.digest
    with pytest.raises(ConversionError) as bad:
        engine.parse(_body(frame[pos:]))
    assert bad.value.reason == "bad_value" and "270" in str(bad.value)
    assert engine.state.digest == digest  # nothing of it applied


@pytest.mark.parametrize(
    ("entries", "reason"),
    [
        ([[(279, 0), (269, "0"), (55, "A"), (270, "1")]], "missing_field"),  # a New bid without 271
        ([[(279, 0), (269, "Z"), (55, "A"), (270, "1"), (271, 1)]], "bad_value"),
        ([[(279, 7), (269, "0"), (55, "A"), (270, "1"), (271, 1)]], "bad_value"),
        ([[(279, 0), (269, "0"), (270, "1"), (271, 1)]], "missing_symbol"),
        ([[(279, 0), (269, "0"), (55, "A"), (270, "1"), (271, 1), (270, "2")]], "duplicate_tag"),
        ([[(279, 0), (269, "0"), (55, "A"), (270, "1e3"), (271, 1)]], "bad_value"),
        ([[(279, 0), (269, "0"), (55, "A"), (270, "1"), (271, -1)]], "bad_value"),
        ([[(279, 0), (269, "0"), (55, "A"), (270, "1"), (271, 1), (1023, 0)]], "bad_value"),
        ([[(269, "0"), (279, 0), (55, "A"), (270, "1"), (271, 1)]], "bad_group"),  # 279 must open it
    ],
)
def test_malformed_messages_are_refused_with_the_reason_named(entries: list[Any], reason: str) -> None:
    with pytest.raises(ConversionError) as bad:
        Fix44Engine().parse(_body(_x(1, *entries)))
    assert bad.value.reason == reason


def test_entry_fields_in_any_order_and_a_security_table() -> None:
    engine = Fix44Engine(securities={"8:123": "ESZ6"})
    entry: list[tuple[int, Any]] = [
        (279, 0),
        (271, 3),
        (1023, 1),
        (48, "123"),
        (22, "8"),
        (270, "5"),
        (269, "1"),
    ]
    msg = engine.parse(_body(_x(4, entry)))
    assert msg.updates[0].symbol == "ESZ6" and msg.updates[0].entries[0].price == 5.0
    with pytest.raises(ConversionError) as bad:
        engine.parse(_body(_x(5, [(279, 0), (269, "1"), (48, "999"), (270, "5"), (271, 1)])))
    assert bad.value.reason == "unknown_security"


@pytest.mark.parametrize("msg_type", ["0", "1", "A", "5", "h", "V"])
def test_session_and_other_messages_are_skipped(msg_type: str) -> None:
    message = fix.encode_message([(35, msg_type), *HEAD, (34, 9)])
    with pytest.raises(ConversionError) as skipped:
        Fix44Engine().parse(_body(message))
    assert skipped.value.reason == SKIPPED


def test_books_survive_the_state_codec_and_the_digest_covers_them() -> None:
    engine = Fix44Engine()
    _apply(engine, _x(1, _keyed(0, "0", "99", 5), _level(0, "1", 1, "101", 2)))
    state = engine.state
    copy = BookState()
    copy.restore({s: from_proto(to_proto(v)) for s, v in state.snapshot().items()})
    assert copy.digest == state.digest == state.recompute_digest()
    values = copy.get("P")
    assert values is not None and values.book is not None
    values.book.bids[0] = (99.0, 6.0, 0)
    copy.set_symbol("P", values)
    assert copy.digest != state.digest


def test_a_capture_written_by_simplefix_gives_the_reference_books() -> None:
    capture = make_capture(symbols=30, messages=300)
    engine = Fix44Engine()
    quarantined = skipped = 0
    for message in capture.messages:
        try:
            engine.state.apply(engine.parse(_body(message)))
        except ConversionError as exc:
            skipped += exc.reason == SKIPPED
            quarantined += exc.reason != SKIPPED
    reference = Reference()
    reference.feed(b"".join(capture.messages))
    assert quarantined == len(capture.malformed) > 0 and skipped > 0
    books = {s: {"bids": [[p, z] for p, z in b[0]], "asks": [[p, z] for p, z in b[1]]}
             for s in reference.books for b in [_sides(engine, s)]}  # fmt: skip
    assert books == reference.shown()
    for symbol, stats in reference.shown_stats().items():
        book = _book(engine, symbol)
        for name, value in stats.items():
            assert getattr(book, name) == pytest.approx(value), (symbol, name)


_level_entries = st.lists(
    st.tuples(
        st.sampled_from([0, 0, 1, 2]),
        st.sampled_from(["0", "1"]),
        st.integers(min_value=1, max_value=6),
        st.integers(min_value=9990, max_value=10010),
        st.integers(min_value=1, max_value=50),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(entries=_level_entries, keyed=st.booleans(), split=st.integers(min_value=1, max_value=5))
def test_the_engine_and_the_reference_agree_on_random_books(
    entries: list[tuple[int, str, int, int, int]], keyed: bool, split: int
) -> None:
    engine, reference = Fix44Engine(depth=4), Reference(depth=4)
    messages = []
    for start in range(0, len(entries), split):
        fields = []
        for action, side, level, ticks, size in entries[start : start + split]:
            entry: list[tuple[int, Any]] = [(279, action), (269, side), (55, "H"), (270, f"{ticks / 100}")]
            entry += [] if action == 2 else [(271, size)]
            fields.append(entry + ([] if keyed else [(1023, level)]))
        messages.append(_x(len(messages) + 1, *fields))
    _apply(engine, *messages)
    reference.feed(b"".join(messages))
    bids, asks = _sides(engine, "H")
    want = reference.shown()["H"]
    assert ([[p, s] for p, s in bids], [[p, s] for p, s in asks]) == (want["bids"], want["asks"])


def test_the_security_table_file_and_the_adapter_options(tmp_path: Path) -> None:
    table = tmp_path / "securities.yaml"
    table.write_text('"8:123": ESZ6\n"456": NQZ6\n')
    assert load_securities(table) == {"8:123": "ESZ6", "456": "NQZ6"}
    table.write_text("- not a mapping\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_securities(table)
    with pytest.raises(ConfigError, match="input_format"):
        AdapterConfig(feed="F", channel="C", channel_number=1, adapter=1, source_endpoint="tcp://127.0.0.1:1",
                      source_stream="A-Z", source_stream_number=1, line_endpoint="tcp://127.0.0.1:2",
                      sync_endpoint="tcp://127.0.0.1:3",
                      input_format="fix45")  # fmt: skip


def test_a_message_without_sending_time_converts_and_one_with_a_bad_one_is_refused() -> None:
    entry: list[tuple[int, Any]] = [(279, 0), (269, "0"), (55, "A"), (270, "1"), (271, 1)]
    bare = fix.encode_message([(35, "X"), (34, 1), (268, 1), *entry])
    assert Fix44Engine().parse(_body(bare)).event_time_ns == 0
    bad = fix.encode_message([(35, "X"), (34, 1), (52, "yesterday"), (268, 1), *entry])
    with pytest.raises(ConversionError) as refused:
        Fix44Engine().parse(_body(bad))
    assert refused.value.reason == "bad_value" and "52" in str(refused.value)


def test_a_message_naming_symbols_past_the_limit_is_refused_whole() -> None:
    engine = Fix44Engine()
    engine.state.max_symbols = 2
    _apply(engine, _x(1, [(279, 0), (269, "0"), (55, "A"), (270, "1"), (271, 1)]))
    digest = engine.state.digest
    two_new = _x(2, [(279, 0), (269, "0"), (55, "B"), (270, "1"), (271, 1)],
                 [(279, 0), (269, "1"), (55, "C"), (270, "2"), (271, 1)])  # fmt: skip
    with pytest.raises(ConversionError) as bad:
        engine.state.stage(engine.parse(_body(two_new)))
    assert bad.value.reason == "symbol_limit" and "'C'" in str(bad.value)
    assert engine.state.digest == digest and len(engine.state) == 1
    # One new symbol (with one it holds) fits; past it, only held symbols move.
    _apply(engine, _x(3, [(279, 0), (269, "0"), (55, "A"), (270, "2"), (271, 1)],
                      [(279, 0), (269, "0"), (55, "B"), (270, "1"), (271, 1)]))  # fmt: skip
    with pytest.raises(ConversionError, match="symbol_limit|2 symbols are held"):
        _apply(engine, _x(4, [(279, 0), (269, "0"), (55, "D"), (270, "1"), (271, 1)]))
    assert sorted(engine.state.snapshot()) == ["A", "B"]
