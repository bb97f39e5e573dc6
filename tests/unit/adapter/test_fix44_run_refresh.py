"""Every fix44 message on the C run: full refreshes, every entry type, the tags the dictionary knows.

``Fix44Run`` converts ``35=W`` full refreshes and ``35=X`` incremental refreshes with any field
the packaged dictionary defines (each checked as its type) and skips a tag it does not define, as
the parser does; it stops only where the Python path must name an error (or reads what the run
does not: the security table, a book's mode switch). Each case plays the C run and the Python
loop side by side (``test_fix44_run.convert``) and compares every block, digest, quarantine
reason and the state left behind, and asserts the C run took what it should.

The messages of :func:`test_messages_laid_out_from_the_spec_run_in_c` are written out by hand
from the FIX 4.4 specification's layouts of MarketDataSnapshotFullRefresh (W) and
MarketDataIncrementalRefresh (X) -- tag by tag, not through feedha's encoder -- with only the
checksum summed here (the standard trailer: the byte sum mod 256).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedha.adapter.conversion import book
from feedha.adapter.formats.fix44.dictionary import Dictionary
from feedha.adapter.formats.fix44.engine import Fix44Engine
from feedha.adapter.formats.fix44.native import fix44_native, fix44_rules
from feedha.proto import fix
from tests.unit.adapter.test_fix44_run import Played, _same_state, convert

needs_native = pytest.mark.skipif(fix44_native() is None, reason="adapter.conversion._orders is not built")
HEAD = [(49, "VENUE"), (56, "FEEDHA"), (52, "20260105-14:30:00.000")]


def _w(
    seq: int, symbol: str, *entries: list[tuple[int, Any]], head: tuple[tuple[int, Any], ...] = ()
) -> bytes:
    body: list[tuple[int, Any]] = [(35, "W"), *HEAD, (34, seq), *head, (55, symbol), (268, len(entries))]
    return fix.encode_message(body + [pair for entry in entries for pair in entry])


def _x(seq: int, *entries: list[tuple[int, Any]]) -> bytes:
    body: list[tuple[int, Any]] = [(35, "X"), *HEAD, (34, seq), (268, len(entries))]
    return fix.encode_message(body + [pair for entry in entries for pair in entry])


def _both(
    stream: list[bytes], *, depth: int = 3, per_frame: int = 4, securities: dict[str, str] | None = None
) -> tuple[Played, dict[str, int]]:
    """Play ``stream`` through the C run and the Python loop: the same blocks, reasons and state."""
    engines = [Fix44Engine(depth=depth, prefer_native=n, securities=securities) for n in (True, False)]
    plays = []
    for engine in engines:
        played, reasons = Played(), {}
        for start in range(0, len(stream), per_frame):
            for reason, count in convert(engine, b"".join(stream[start : start + per_frame]), played).items():
                reasons[reason] = reasons.get(reason, 0) + count
        plays.append((played, reasons))
    assert plays[0] == plays[1]
    _same_state(*engines)
    return plays[0]


def _bid(price: str, size: str = "5", **more: Any) -> list[tuple[int, Any]]:
    return [(269, "0"), (270, price), (271, size), *more.get("extra", ())]


def _ask(price: str, size: str = "6", **more: Any) -> list[tuple[int, Any]]:
    return [(269, "1"), (270, price), (271, size), *more.get("extra", ())]


@needs_native
def test_full_refreshes_of_both_kinds_run_in_c() -> None:
    level = [(1023, "2")], [(1023, "1")], [(1023, "3")]
    stream = [
        _w(1, "P", _bid("10"), _bid("9.5"), _ask("11"), _bid("10", "7"), _ask("12", extra=[(346, "4")])),
        _w(2, "L", _bid("10", extra=level[0]), _bid("10.5", extra=level[1]), _ask("11", extra=level[2]),
           _ask("11.5", extra=level[1]), _bid("9", extra=[(1023, "4")]), _bid("8", extra=[(1023, "2")])),
        _x(3, [(279, "1"), *_bid("10.25", "1"), (55, "L"), (1023, "1")],
           [(279, "0"), *_ask("10.75"), (55, "P")]),
        _w(4, "P", _bid("10"), _ask("10.5")),  # smaller than before: levels go, the book is replaced
        _w(5, "P"),  # 268=0: an empty book
        _w(6, "NEW", _ask("3"), _bid("2")),  # a new symbol's first message
        _w(7, "L", _bid("1", extra=[(1023, "1")]), _bid("1.5")),  # level-indexed: no 1023 sorts first
        _w(8, "P", _bid("4"), _bid("5"), _bid("3"), _bid("6"), _bid("2")),  # deeper than the depth
    ]  # fmt: skip
    played, reasons = _both(stream)
    assert reasons == {} and played.from_runs == len(stream)


@needs_native
def test_session_entries_of_a_full_refresh_set_what_they_carry_and_a_trade_is_no_new_trade() -> None:
    kinds = [[(269, kind), (270, "7.5"), (271, "3")] for kind in "2456783"]
    stream = [
        _x(1, [(279, "0"), (269, "2"), (55, "S"), (270, "9"), (271, "4")]),  # a trade: volume 4
        _w(2, "S", *kinds, [(269, "B"), (271, "40")], [(269, "C"), (271, "12")], _bid("7"), [(269, "9")]),
        _w(3, "S", [(269, "7"), (270, "1")], [(269, "8"), (270, "99")]),  # set as given, not compared
        _x(4, [(279, "0"), (269, "2"), (55, "S"), (270, "2"), (271, "1")]),  # the volume goes on from 40
    ]
    played, reasons = _both(stream)
    assert reasons == {} and played.from_runs == len(stream)


@needs_native
def test_entry_types_that_move_nothing_and_tags_the_dictionary_knows_run_in_c() -> None:
    extra = [(278, "id1"), (277, "A"), (272, "20260105"), (273, "14:30:00.5"), (274, "1")]
    stream = [
        _w(1, "S", _bid("10", extra=extra), _ask("11", extra=[(9999, "anything"), (288, "BUYER")])),
        fix.encode_message(
            [(35, "X"), (1500, "stream"), *HEAD, (34, 2), (60, "20260105-14:30:01"), (262, "r"), (9999, "x"),
             (1021, "2"), (268, 3), (279, "0"), (269, "3"), (55, "S"), (279, "1"), (269, "J"), (55, "S"),
             (270, "1"), (336, "s"), (83, "-7"), (279, "2"), (269, "9"), (55, "S"), (9998, "y"), (285, "0")]
        ),
    ]  # fmt: skip
    played, reasons = _both(stream)
    assert reasons == {} and played.from_runs == len(stream)


BAD = {
    "a date of seven digits": _w(2, "S", _bid("1", extra=[(272, "2026010")])),
    "a char outside its values": _w(2, "S", _bid("1", extra=[(274, "9")])),
    "a bad entry type": _w(2, "S", [(269, "Z"), (270, "1")]),
    "a body field after the group": _w(2, "S", _bid("1"), [(60, "20260105-14:30:01")]),
    "a body field twice": _w(2, "S", _bid("1"), head=((262, "a"), (262, "b"))),
    "no symbol": fix.encode_message([(35, "W"), *HEAD, (34, 2), (268, 1), *_bid("1")]),
    "a count one short": fix.encode_message([(35, "W"), *HEAD, (34, 2), (55, "S"), (268, 2), *_bid("1")]),
    "an entry field twice": _w(2, "S", _bid("1", extra=[(270, "2")])),
    "a bid without its size": _w(2, "S", [(269, "0"), (270, "1")]),
    "a level of zero": _w(2, "S", _bid("1", extra=[(1023, "0")])),
    "a negative size": _w(2, "S", _bid("1", "-1")),
    "a security not in the table": fix.encode_message(
        [(35, "W"), *HEAD, (34, 2), (48, "US0"), (268, 1), *_bid("1")]
    ),
    "an action past Delete in an X": _x(2, [(279, "4"), *_bid("1"), (55, "S")]),
}


@needs_native
@pytest.mark.parametrize("case", sorted(BAD))
def test_what_the_python_path_refuses_or_reads_itself_stops_the_run_and_comes_out_the_same(case: str) -> None:
    stream = [_w(1, "S", _bid("9"), _ask("10")), BAD[case], _w(3, "S", _bid("8"))]
    played, _reasons = _both(stream, per_frame=3)
    assert played.from_runs == 2  # the first and the last: the one between took the careful path


@pytest.fixture
def three_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    """A price-keyed side keeps three prices (the book module's bound and the engine's copy)."""
    monkeypatch.setattr(book, "MAX_PRICES", 3)
    monkeypatch.setattr("feedha.adapter.formats.fix44.engine.MAX_PRICES", 3)


@needs_native
@pytest.mark.usefixtures("three_prices")
def test_a_full_refresh_past_the_prices_a_side_keeps_is_the_python_paths_book_full() -> None:
    stream = [
        _w(1, "S", _bid("1"), _bid("2"), _ask("5")),
        _w(2, "S", _bid("1"), _bid("2"), _bid("3"), _bid("4"), _ask("6")),  # four prices: refused whole
        _w(3, "S", _bid("1"), _bid("2"), _bid("3"), _bid("2", "9")),  # three (one twice): taken
    ]
    played, reasons = _both(stream, per_frame=3)
    assert reasons == {"book_full": 1} and played.from_runs == 2


def _spec_message(fields: str) -> bytes:
    """A message typed out as the spec lays it out ('|' for SOH), with BodyLength and CheckSum."""
    body = fields.replace("|", "\x01").encode()
    head = b"8=FIX.4.4\x019=%d\x01" % len(body)
    return head + body + b"10=%03d\x01" % (sum(head + body) % 256)


SPEC_MESSAGES = [
    # MarketDataSnapshotFullRefresh: <StandardHeader>, MDReqID, <Instrument> (Symbol), NoMDEntries
    # and its MDFullGrp (MDEntryType first: MDEntryPx, MDEntrySize, MDEntryDate, MDEntryTime,
    # NumberOfOrders, MDEntryPositionNo), <StandardTrailer>.
    "35=W|49=VENUE|56=FEEDHA|34=1|52=20260105-14:30:00.000|262=REQ1|55=ABC|268=4|"
    "269=0|270=100.25|271=500|272=20260105|273=14:30:00|346=3|290=1|"
    "269=0|270=100.00|271=200|346=1|290=2|"
    "269=1|270=100.50|271=300|346=2|290=1|"
    "269=2|270=100.30|271=50|",
    # MarketDataIncrementalRefresh: NoMDEntries and its MDIncGrp (MDUpdateAction first,
    # DeleteReason, MDEntryType, MDEntryID, <Instrument>, MDEntryPx, MDEntrySize, RptSeq).
    "35=X|49=VENUE|56=FEEDHA|34=2|52=20260105-14:30:00.100|268=3|"
    "279=0|269=1|278=E7|55=ABC|270=100.75|271=100|83=1|"
    "279=1|269=0|55=ABC|270=100.25|271=450|83=2|"
    "279=2|285=0|269=0|55=ABC|270=100.00|83=3|",
    # A trade and the session's figures: Trade (2), Opening (4), Trading session high (7) and low
    # (8), Trade volume (B); a symbol the stream never named before.
    "35=X|49=VENUE|56=FEEDHA|34=3|52=20260105-14:30:00.200|60=20260105-14:30:00.150|268=5|"
    "279=0|269=2|55=XYZ|270=20.5|271=10|279=0|269=4|270=20.1|279=0|269=7|270=21|"
    "279=0|269=8|270=19.9|279=0|269=B|271=1000|",
    # A level-indexed book (MDPriceLevel), its full refresh and a change of its second level.
    "35=W|49=VENUE|56=FEEDHA|34=4|52=20260105-14:30:00.300|55=LVL|268=3|"
    "269=0|270=5.5|271=10|1023=1|269=0|270=5.4|271=20|1023=2|269=1|270=5.6|271=15|1023=1|",
    "35=X|49=VENUE|56=FEEDHA|34=5|52=20260105-14:30:00.400|268=1|279=1|269=0|55=LVL|270=5.45|271=5|1023=2|",
    # Heartbeat: not market data (the careful path counts it as skipped).
    "35=0|49=VENUE|56=FEEDHA|34=6|52=20260105-14:30:01.000|",
]


@needs_native
def test_messages_laid_out_from_the_spec_run_in_c() -> None:
    stream = [_spec_message(fields) for fields in SPEC_MESSAGES]
    played, reasons = _both(stream, depth=10, per_frame=6)
    assert reasons == {"skipped": 1} and played.from_runs == len(stream) - 1


def test_the_packaged_dictionary_is_the_c_runs_and_one_it_reads_otherwise_is_not() -> None:
    packaged = Dictionary.load()
    rules = fix44_rules(packaged)
    assert rules is not None
    fields, roles = rules
    assert (270, "price", None) in fields and ("X", 55, "entry") in roles and ("W", 55, "head") in roles
    assert ("X", 48, "entry") in roles and ("W", 22, "head") in roles
    assert not any(tag == 268 for _kind, tag, _role in roles)
    price_as_int = {**packaged.fields, 270: dataclasses.replace(packaged.fields[270], type="int")}
    assert fix44_rules(dataclasses.replace(packaged, fields=price_as_int)) is None
    needs = {**packaged.entry_needs, "4": (270, 271)}
    assert fix44_rules(dataclasses.replace(packaged, entry_needs=needs)) is None
    assert fix44_rules(dataclasses.replace(packaged, header_required=(34, 52))) is None


def _entry(action: str, kind: str, symbol: str, price: str, size: str = "", level: str = "") -> list[Any]:
    named = ((270, price), (271, size), (1023, level))
    return [(279, action), (269, kind), (55, symbol), *((tag, value) for tag, value in named if value)]


@needs_native
def test_an_entry_of_the_other_kind_switches_its_book_in_c() -> None:
    stream = [
        _w(1, "P", _bid("10"), _bid("9"), _bid("8"), _bid("7"), _ask("11"), _ask("12")),  # deeper than 3
        _w(2, "L", _bid("5", extra=[(1023, "1")]), _bid("5", "2", extra=[(1023, "2")]),
           _ask("6", extra=[(1023, "1")])),
        # P becomes level-indexed (its best three a side), then price-keyed again in one message
        _x(3, _entry("0", "0", "P", "10.5", "1", "1"), _entry("1", "1", "P", "11.5", "2"),
           _entry("2", "0", "P", "9")),
        # L becomes price-keyed: one level a price (5 twice: the first), then a level again
        _x(4, _entry("0", "1", "L", "6.5", "3"), _entry("0", "0", "L", "4", "1", "2")),
        _x(5, _entry("1", "0", "L", "4.5", "2", "1"),
           _entry("0", "0", "NEW", "1", "1", "1")),  # a new level-indexed book
    ]  # fmt: skip
    played, reasons = _both(stream, per_frame=5)
    assert reasons == {} and played.from_runs == len(stream)


@needs_native
@pytest.mark.usefixtures("three_prices")
def test_a_switch_undone_by_a_later_refusal_leaves_the_book_as_it_was() -> None:
    stream = [
        _w(1, "L", _bid("5", extra=[(1023, "1")]), _bid("4", extra=[(1023, "2")]),
           _bid("3", extra=[(1023, "3")])),
        # switched to prices (three bids), then a fourth price: book_full, the whole message refused
        _x(2, _entry("1", "1", "L", "6", "1"), _entry("0", "0", "L", "2", "1")),
        _x(3, _entry("1", "0", "L", "4.5", "2", "2")),  # the book is level-indexed as before
    ]  # fmt: skip
    played, reasons = _both(stream, per_frame=3)
    assert reasons == {"book_full": 1} and played.from_runs == 2


# Values of each field type: valid ones, and ones the dictionary refuses or the C run reads
# no further (a 19-digit int, non-ASCII text): each must come out as the Python path has it.
VALUES = {
    "int": ("7", "-3", "0", "1234567890123456789", "x", "1.5"),
    "seqnum": ("5", "0", "05"),
    "price": ("1.5", "-2", ".5", "1e3"),
    "qty": ("10", "0.25", "-1", "nan"),
    "char": ("Y", "N", "0", "1", "A", "Z", "YY"),
    "string": ("abc", "R-1", "\u00e9"),
    "timestamp": ("20260105-14:30:00", "20260105-14:30:00.123", "2026"),
    "time": ("14:30:00", "14:30:00.5", "1:2"),
    "date": ("20260105", "2026"),
}
_READ_BY_RUN = frozenset({34, 35, 268, 269, 279, 55, 270, 271, 1023, 346, 48, 22})


@st.composite
def tagged_messages(draw: Any, seq: int) -> bytes:
    """A W or an X with random other fields of the dictionary (and unknown ones), mostly in place."""
    dictionary = Dictionary.load()
    kind = draw(st.sampled_from("XW"))
    spec = dictionary.messages[kind]
    head_tags = sorted((dictionary.header_fields | spec.fields) - _READ_BY_RUN)
    group_tags = sorted(spec.group.fields - _READ_BY_RUN)

    def extra(tags: list[int]) -> list[tuple[int, Any]]:
        chosen = draw(st.lists(st.sampled_from(tags + [9999, 7777]), max_size=3))
        return [(tag, draw(st.sampled_from(VALUES[dictionary.fields[tag].type])) if tag in dictionary.fields
                 else "u") for tag in chosen]  # fmt: skip

    symbol = draw(st.sampled_from(("A", "B")))
    entries = []
    for _ in range(draw(st.integers(1, 3))):
        side = draw(st.sampled_from("01"))
        entry = [
            (269, side),
            (270, draw(st.sampled_from(("10", "11", "12")))),
            (271, "5"),
            *extra(group_tags),
        ]
        entries.append([(279, "0"), *entry, (55, symbol)] if kind == "X" else entry)
    head = [*HEAD, (34, seq), *extra(head_tags)]
    if kind == "W":
        head.append((55, symbol))
    tail = extra(head_tags + group_tags) if draw(st.booleans()) and draw(st.booleans()) else []
    body = [(35, kind), *head, (268, len(entries)), *[pair for entry in entries for pair in entry], *tail]
    return fix.encode_message(body)


@needs_native
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 12).flatmap(lambda n: st.tuples(*(tagged_messages(seq) for seq in range(1, n + 1)))))
def test_random_fields_of_the_dictionary_come_out_as_the_python_paths(stream: tuple[bytes, ...]) -> None:
    _both(list(stream), per_frame=4)


SECURITIES = {"US1": "AAA", "4:US2": "BBB", "US2": "CCC", "8:US3": "", "US3": "DDD"}


@needs_native
def test_instruments_named_through_the_security_table_run_in_c() -> None:
    def x(seq: int, *entries: list[tuple[int, Any]]) -> bytes:
        return _x(seq, *entries)

    stream = [
        x(1, [(279, "0"), *_bid("10"), (48, "US1")], [(279, "0"), *_ask("11"), (22, "4"), (48, "US2")]),
        x(2, [(279, "0"), *_bid("9"), (48, "US2")], [(279, "0"), *_ask("12")]),  # CCC; then inherited
        x(3, [(279, "1"), *_bid("9", "7"), (48, "US3"), (22, "8")]),  # "8:US3" is empty: "US3", DDD
        x(4, [(279, "0"), *_bid("8"), (55, "EEE"), (48, "NOPE")]),  # 55 wins; 48 only checked
        x(5, [(279, "0"), *_bid("7"), (22, "4"), (55, "AAA")], [(279, "2"), *_ask("12")]),
        fix.encode_message([(35, "W"), *HEAD, (34, 6), (22, "4"), (48, "US2"), (268, 1), *_bid("5")]),
        x(7, [(279, "0"), *_bid("6"), (48, "NOPE")]),  # unknown_security: the Python path refuses it
        fix.encode_message([(35, "W"), *HEAD, (34, 8), (48, "NOPE"), (268, 0)]),  # so does it here
    ]
    played, reasons = _both(stream, per_frame=4, securities=SECURITIES)
    assert reasons == {"unknown_security": 2} and played.from_runs == len(stream) - 2
    played, reasons = _both(stream, per_frame=4)  # without a table: every 48 without 55 is refused
    assert reasons == {"unknown_security": 6} and played.from_runs == 2
