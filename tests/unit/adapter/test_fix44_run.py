"""The fix44 C run (``_orders.Fix44Run``) against the Python loop it replaces, message for message.

The reference is the engine without its C run (``prefer_native=False``): its runs are
``LoopEngine.run`` over ``Fix44Converter.parse``, ``BookState.stage``/``commit`` and
``Fix44Engine.encode_staged``. The C run stops at other places (a new symbol, a ``35=W``, an
unusual tag, every error), so the two are compared on what a play publishes -- every message's
block and the digest after it, whether a run or the careful path converted it -- on the
quarantine reasons and on the state left behind. Messages are written field by field here
(``proto.fix.encode_message``) or by a third-party FIX library (``tests.fix44_capture``).
"""

from __future__ import annotations

import tracemalloc
from array import array
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedha.adapter.conversion import book
from feedha.adapter.errors import ConversionError
from feedha.adapter.formats.fix44.engine import Fix44Engine
from feedha.adapter.formats.fix44.native import fix44_native
from feedha.proto import fix, wire
from tests.fix44_capture import make_capture

needs_native = pytest.mark.skipif(fix44_native() is None, reason="adapter.conversion._orders is not built")

SYMBOLS = ("AAA", "BB", "C.D")
PRICES = (
    "100",
    "100.0",
    "100.50",
    "100.5",
    "99.75",
    "101",
    "-1",
    ".5",
    "1.",
    "0",
    "-0",
    "12345678901234567890.5",
)
# A grid of 40 prices: an opening book of up to 20 a side from it, and entries on it, make
# books deeper than the depth (hidden levels, the shown cut) and Deletes of absent prices.
GRID = tuple(f"{95 + k / 4:g}" for k in range(40))
TWINS = {"0": "-0", "-0": "0", "100": "100.0", "100.0": "100", "100.5": "100.50", "100.50": "100.5"}
SIZES = ("0", "5", "10.5", "-0", "250", "9999999999999999999999")
BAD_NUMBERS = ("1e2", "-3", "abc", "1" * 41)  # a quarantine (a negative size; the rest anywhere)
GOOD_TIMES = ("20260105-14:30:00.000", "20260105-14:30:01", "20260105-14:30:00.123456789")
TIMES = GOOD_TIMES * 8 + ("20260105-14:30", "2026")


@dataclass
class Played:
    """What a play published: every message's wire block and the digest after it, in order."""

    blocks: bytearray = field(default_factory=bytearray)
    digests: bytearray = field(default_factory=bytearray)
    from_runs: int = field(default=0, compare=False)  # messages the engine's runs converted


def convert(engine: Fix44Engine, frame: bytes, played: Played) -> dict[str, int]:
    """Convert one frame as the core would: runs, and the careful path one message at a time."""
    reasons: dict[str, int] = {}
    pos, run = 0, engine.run_function()
    while pos < len(frame):
        pos, count, stop, blocks, _first, digests, _payloads = run(
            frame, pos, 0, 0, 1 << 20, 1 << 20, 1, 1, True, False
        )
        played.from_runs += count
        played.blocks += blocks
        played.digests += digests
        if stop != 1:
            continue
        body, pos = engine.next_message(frame, pos)
        try:
            if body is None:
                raise ConversionError("malformed", "not a FIX message")
            msg = engine.parse(body)
            staged = engine.state.stage(msg)
            payload = engine.encode_staged(msg, staged, 1)
            engine.state.commit(staged)
        except ConversionError as exc:
            reasons[exc.reason] = reasons.get(exc.reason, 0) + 1
            continue
        played.blocks += wire.encode_block(1, msg.source_seq, payload)
        played.digests += array("Q", [engine.state.digest]).tobytes()
    return reasons


def _same_state(native: Fix44Engine, reference: Fix44Engine) -> None:
    assert native.state.digest == reference.state.digest == native.state.recompute_digest()
    assert native.state.snapshot() == reference.state.snapshot()


# ---- messages, written field by field ----


def _rarely(draw: Any, one_in: int) -> bool:
    """True about once in ``one_in`` draws (shrinking towards False: towards a clean message)."""
    return bool(draw(st.sampled_from([False] * (one_in - 1) + [True])))


def _number(good: tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.sampled_from(good * 8 + BAD_NUMBERS)  # about one in twenty-five bad


def _price(draw: Any, named: list[str]) -> str:
    """A price: often one this message already named, as written or as its twin (a price twice in
    one message, 0 and -0 among them), else any (zero often)."""
    if named and _rarely(draw, 3):
        price = str(draw(st.sampled_from(named)))
        return TWINS.get(price, price) if draw(st.booleans()) else price
    price = str(draw(st.one_of(_number(PRICES), st.sampled_from(GRID), st.sampled_from(("0", "-0")))))
    named.append(price)
    return price


def _entry(draw: Any, previous: str, named: list[str]) -> tuple[list[tuple[int, Any]], str]:
    action = draw(st.sampled_from(("0", "1", "2") * 10 + ("3",)))
    kind = draw(st.sampled_from(("0", "1") * 8 + ("2", "2", "2", "3", "4", "5", "6", "7", "8", "B", "C")))
    fields: list[tuple[int, Any]] = [(279, action), (269, kind)]
    symbol = draw(st.sampled_from(SYMBOLS)) if not previous or draw(st.integers(0, 2)) else ""
    if _rarely(draw, 30):
        symbol = ""  # the previous entry's, or none: missing_symbol
    if symbol:
        fields.append((55, symbol))
    # BB's book is level-indexed, the others' price-keyed: mostly entries of the book's kind
    level_book = (symbol or previous) == "BB"
    if (not _rarely(draw, 5)) if level_book else _rarely(draw, 10):
        fields.append((1023, draw(st.sampled_from(("1", "2", "3", "1", "2", "5") * 3 + ("0", "01")))))
    if action != "2" or not _rarely(draw, 2 if level_book else 20):
        fields.append((270, _price(draw, named)))
    if action != "2" or _rarely(draw, 4):
        fields.append((271, draw(_number(SIZES))))
    for tag, value in ((346, "3"), (273, "14:30:00.5"), (83, "7"), (9999, "x"), (277, "A")):
        if _rarely(draw, 16):
            fields.append((tag, value))
    if _rarely(draw, 40):
        fields = draw(st.permutations(fields))  # 279 no longer first: another entry or bad_group
    if _rarely(draw, 40):
        fields.append(fields[-1])  # a repeated tag
    return fields, symbol or previous


@st.composite
def messages(draw: Any, seq: int) -> bytes:
    """One message of a random fix44 stream (mostly incremental refreshes of known symbols)."""
    kind = draw(st.sampled_from(("X",) * 8 + ("W", "0")))
    head: list[tuple[int, Any]] = [
        (49, "VENUE"),
        (56, "FEEDHA"),
        (34, seq),
        (52, draw(st.sampled_from(TIMES))),
    ]
    if _rarely(draw, 6):
        head.append((60, draw(st.sampled_from(TIMES))))
    if _rarely(draw, 20):
        head.append(draw(st.sampled_from(((262, "R1"), (9999, "x"), (49, "AGAIN"), (34, seq)))))
    head = draw(st.permutations(head))
    if kind == "0":
        return fix.encode_message([(35, "0"), *head])
    entries, symbol, named = [], "", []
    for _ in range(draw(st.integers(1, 5))):
        entry, symbol = _entry(draw, symbol, named)
        entries.append(entry)
    if kind == "W":
        entries = [[(tag, value) for tag, value in entry if tag not in (279, 55)] for entry in entries]
        body = [(35, "W"), *head, (55, draw(st.sampled_from(SYMBOLS))), (268, len(entries))]
    else:
        count = len(entries) + draw(st.sampled_from((0,) * 15 + (1, -1)))
        body = [(35, "X"), *head, (268, count)]
    message = fix.encode_message(body + [pair for entry in entries for pair in entry])
    damage = draw(st.sampled_from((2,) * 38 + (0, 1)))
    if damage == 0:
        return message[:-3] + b"%03d\x01" % ((int(message[-4:-1]) + 1) % 256)  # a wrong checksum
    if damage == 1:
        return message[: draw(st.integers(1, len(message) - 1))]  # cut short
    return message


@st.composite
def streams(draw: Any) -> list[bytes]:
    """A stream: opening refreshes of both book kinds (AAA: 1-20 prices a side), then random messages."""
    bids, asks = draw(st.integers(1, 20)), draw(st.integers(1, 20))
    book = [[(269, "0"), (270, price), (271, "5")] for price in GRID[20 - bids : 20]]
    book += [[(269, "1"), (270, price), (271, "6")] for price in GRID[20 : 20 + asks]]
    opening = [
        fix.encode_message(
            [(35, "W"), (34, 1), (52, TIMES[0]), (55, "AAA"), (268, bids + asks)]
            + [pair for entry in book for pair in entry]
        ),
        fix.encode_message(
            [(35, "W"), (34, 2), (52, TIMES[0]), (55, "BB"), (268, 2)]
            + [
                (269, "0"),
                (270, "99"),
                (271, "5"),
                (1023, "1"),
                (269, "1"),
                (270, "101"),
                (271, "6"),
                (1023, "1"),
            ]
        ),
    ]
    count = draw(st.integers(1, 40))
    return opening + [draw(messages(seq)) for seq in range(3, 3 + count)]


def _play(engine: Fix44Engine, stream: list[bytes], per_frame: int) -> tuple[Played, dict[str, int]]:
    played, reasons = Played(), {}
    for start in range(0, len(stream), per_frame):
        for reason, count in convert(engine, b"".join(stream[start : start + per_frame]), played).items():
            reasons[reason] = reasons.get(reason, 0) + count
    return played, reasons


@needs_native
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams(), st.integers(1, 5), st.integers(1, 20))
def test_random_streams_publish_the_same_blocks_and_leave_the_same_state(
    stream: list[bytes], depth: int, per_frame: int
) -> None:
    _both_engines(stream, depth, per_frame)


def _both_engines(stream: list[bytes], depth: int, per_frame: int) -> tuple[Played, dict[str, int]]:
    """Play ``stream`` through the C run and the Python loop; both publish and keep the same."""
    engines = [Fix44Engine(depth=depth, prefer_native=n) for n in (True, False)]
    assert [engine.is_native for engine in engines] == [True, False]
    (native, native_reasons), (reference, reference_reasons) = (_play(e, stream, per_frame) for e in engines)
    assert native == reference and native_reasons == reference_reasons
    _same_state(*engines)
    return native, native_reasons


@st.composite
def book_streams(draw: Any) -> list[bytes]:
    """Clean refreshes of two deep price-keyed books, which the C run takes: what it writes of a book.

    Books of up to 20 prices a side from the grid, then bid, offer and some trade entries at
    prices of the grid and zeros, often a price the message already named (or its twin: 0 and
    -0), Deletes of prices the book does not have among them.
    """
    opening = []
    for seq, symbol in enumerate(("AAA", "C.D"), start=1):
        bids, asks = draw(st.integers(1, 20)), draw(st.integers(1, 20))
        book = [("0", "0", symbol, price, "5") for price in GRID[20 - bids : 20]]
        book += [("0", "1", symbol, price, "6") for price in GRID[20 : 20 + asks]]
        opening.append(_x(seq, *book))
    stream = []
    for seq in range(3, 3 + draw(st.integers(1, 30))):
        entries, named = [], []
        for _ in range(draw(st.integers(1, 6))):
            action, kind = draw(st.sampled_from("012")), draw(st.sampled_from("0101012"))
            size = "" if action == "2" else draw(st.sampled_from(("1", "5", "0", "-0", "7.5")))
            entries.append((action, kind, draw(st.sampled_from(("AAA", "C.D"))), _price(draw, named), size))
        stream.append(_x(seq, *entries))
    return opening + stream


@needs_native
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(book_streams(), st.integers(1, 5), st.integers(1, 20))
def test_deep_price_keyed_books_publish_the_same_blocks_and_leave_the_same_state(
    stream: list[bytes], depth: int, per_frame: int
) -> None:
    native, native_reasons = _both_engines(stream, depth, per_frame)
    assert native.from_runs >= len(stream) - 2 - sum(native_reasons.values())  # the C run took them


@needs_native
def test_a_capture_runs_in_c_and_publishes_what_the_python_loop_publishes() -> None:
    capture = make_capture(symbols=30, messages=1500, seed=11, depth=4)
    frames = [b"".join(capture.messages[i : i + 25]) for i in range(0, len(capture.messages), 25)]
    engines = [Fix44Engine(depth=4, prefer_native=n) for n in (True, False)]
    plays = []
    for engine in engines:
        played = Played()
        reasons: dict[str, int] = {}
        for frame in frames:
            for reason, count in convert(engine, frame, played).items():
                reasons[reason] = reasons.get(reason, 0) + count
        plays.append((played, reasons))
    assert plays[0] == plays[1] and len(plays[0][0].digests) // 8 > 1000
    assert plays[0][0].from_runs > 0.5 * plays[1][0].from_runs  # most of it went through the C run
    _same_state(*engines)


def _x(seq: int, *entries: tuple[str, ...]) -> bytes:
    """A 35=X of entries (action, type, symbol, price, size[, level]); an empty value is left out."""
    body: list[tuple[int, Any]] = [
        (35, "X"),
        (49, "V"),
        (56, "F"),
        (34, seq),
        (52, TIMES[0]),
        (268, len(entries)),
    ]
    for action, kind, symbol, price, size, *level in entries:
        body += [(279, action), (269, kind), (55, symbol)]
        named = ((270, price), (271, size), (1023, level[0] if level else ""))
        body += [(tag, value) for tag, value in named if value]
    return fix.encode_message(body)


def _opened(native: bool, depth: int = 2) -> Fix44Engine:
    engine = Fix44Engine(depth=depth, prefer_native=native)
    opening = _x(1, ("0", "0", "AAA", "10", "1"), ("0", "1", "BB", "11", "1"))
    assert convert(engine, opening, Played()) == {}
    return engine


def _run_frame() -> bytes:
    return b"".join(
        [
            _x(2, ("0", "0", "AAA", "10.5", "3"), ("0", "1", "AAA", "11", "4")),
            _x(3, ("0", "2", "AAA", "10.75", "100"), ("1", "0", "BB", "10", "2")),
            _x(4, ("2", "0", "AAA", "10", ""), ("0", "1", "BB", "10.5", "1")),
            _x(5, ("0", "0", "AAA", "9", "9")),
            _x(6, ("0", "2", "BB", "10.6", "7"), ("0", "0", "AAA", "8", "1")),
            _x(7, ("1", "1", "AAA", "11", "40")),
        ]
    )


@needs_native
@pytest.mark.parametrize(
    ("expect_seq", "stop_seq", "room", "max_count", "publish", "payloads"),
    [
        (0, 0, 1 << 20, 1 << 20, True, True),  # the whole frame
        (3, 0, 1 << 20, 1 << 20, True, False),  # the first message is not the one expected
        (0, 5, 1 << 20, 1 << 20, True, True),  # stops before a position the sync rules watch
        (0, 0, 700, 1 << 20, True, False),  # the packet fills
        (0, 0, -40, 1 << 20, True, False),  # an empty packet takes its first block whatever its size
        (0, 0, 1 << 20, 4, True, True),  # at most four
        (0, 0, 0, 1 << 20, False, False),  # a backup that only converts
    ],
)
def test_the_run_contract_is_the_python_loops(
    expect_seq: int, stop_seq: int, room: int, max_count: int, publish: bool, payloads: bool
) -> None:
    frame = _run_frame()
    engines = [_opened(n) for n in (True, False)]
    results = [
        e.run_function()(frame, 0, expect_seq, stop_seq, room, max_count, 77, 3, publish, payloads)
        for e in engines
    ]
    assert results[0] == results[1]
    assert results[0][1] > 0 or expect_seq == 3  # it converted something (but for the wrong first message)
    _same_state(*engines)


@needs_native
def test_signed_zeros_and_session_values_come_out_as_the_python_loops() -> None:
    # ``value or 0.0`` turns -0.0 into 0.0 in the volume, the summary and a trade's figures.
    frame = b"".join(
        [
            _x(2, ("0", "B", "AAA", "", "-0"), ("0", "2", "AAA", "-0", "-0"), ("0", "2", "BB", "-0", "0")),
            _x(3, ("0", "4", "AAA", "-0", ""), ("0", "7", "AAA", "-0", ""), ("0", "8", "AAA", "-0", "")),
            _x(4, ("0", "C", "AAA", "", "-0"), ("0", "5", "BB", "7", ""), ("0", "6", "BB", "8", "")),
            _x(5, ("0", "0", "AAA", "-0", "-0"), ("0", "2", "AAA", "5", "0"), ("0", "B", "AAA", "", "3")),
        ]
    )
    engines = [_opened(n) for n in (True, False)]
    plays = []
    for engine in engines:
        played = Played()
        assert convert(engine, frame, played) == {}
        plays.append(played)
    assert plays[0] == plays[1] and plays[0].from_runs == 4
    _same_state(*engines)


@needs_native
def test_values_of_another_type_come_out_the_same() -> None:
    # An image from another implementation may carry an int where we keep a float: the C state
    # keeps the double that the digest and the wire already made of it, and the C run takes it.
    engines = [_opened(n) for n in (True, False)]
    plays = []
    for engine in engines:
        values = engine.state.snapshot()
        assert values["AAA"].book is not None
        values["AAA"].book.volume = 5  # an int, not a float
        engine.state.restore(values)
        played = Played()
        assert convert(engine, _x(2, ("0", "2", "AAA", "10", "3")), played) == {}
        plays.append(played)
    assert plays[0] == plays[1] and plays[0].from_runs == 1
    _same_state(*engines)


@needs_native
def test_a_full_side_is_the_python_paths_book_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(book, "MAX_PRICES", 3)
    engines = [_opened(n) for n in (True, False)]
    engines[0]._native_run = _run_type()(engines[0].state.native, 3).run  # type: ignore[attr-defined]
    frame = b"".join(_x(seq, ("0", "0", "AAA", str(seq), "1")) for seq in range(2, 6))
    plays = []
    for engine in engines:
        played = Played()
        assert convert(engine, frame, played) == {"book_full": 2}  # the fourth and fifth price
        plays.append(played)
    assert plays[0] == plays[1] and plays[0].from_runs == 2
    _same_state(*engines)


def _run_type() -> Any:
    native = fix44_native()
    assert native is not None
    return native[1]


@needs_native
def test_a_run_over_anything_but_a_book_table_is_refused_not_crashed() -> None:
    engine = _opened(True)
    frame = _run_frame()
    with pytest.raises(ValueError, match="out of range"):
        engine.run_function()(frame, len(frame) + 1, 0, 0, 1 << 20, 1 << 20, 1, 1, True, False)
    with pytest.raises(TypeError):
        _run_type()(engine.state, 5000)  # the Python object, not its table
    with pytest.raises(ValueError, match="max_prices"):
        _run_type()(engine.state.native, -1)  # type: ignore[attr-defined]


@needs_native
def test_thousands_of_runs_hold_no_memory() -> None:
    engine = _opened(True, depth=4)
    changes = [
        _x(8 + size, ("1", "0", "AAA", "10", str(size)), ("1", "1", "BB", "11", str(size))) for size in (1, 2)
    ]
    frame = b"".join(changes)
    tracemalloc.start()
    try:
        for _ in range(200):  # warm: every size of everything allocated once
            assert engine.run_function()(frame, 0, 0, 0, 1 << 20, 1 << 20, 1, 1, True, True)[1] == 2
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(5000):
            assert engine.run_function()(frame, 0, 0, 0, 1 << 20, 1 << 20, 1, 1, True, True)[1] == 2
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, grown
