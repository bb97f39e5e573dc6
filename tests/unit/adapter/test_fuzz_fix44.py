"""Fuzzing fix44: FIX 4.4 market data framed by hand with values at their boundaries, and mutated captures.

Messages are written here as the FIX 4.4 specification lays them out: ``8=`` BeginString,
``9=`` BodyLength (the bytes after its SOH up to the SOH before ``10=``), the header and body
fields, the ``268`` NoMDEntries group, and ``10=`` CheckSum (the byte sum mod 256, three
digits), counted by ``tests.format_fuzz.fix_frame``, not by feedha's encoder. Values are
drawn at the boundaries of their types: counts and levels of 0, 1, one off the truth and past
int64, sequence numbers around ``MAX_SOURCE_SEQ``, decimals of 40 and 41 characters, signs,
exponents, blanks. The captures written by a third-party FIX library (``tests/fix44_capture.py``,
simplefix) are mutated byte by byte, their length fields (``9=``, ``268=``, ``34=``, ``10=``
and the entry fields) set to boundaries, framed again or not.

What must hold (``tests/format_fuzz.py``): no exception escapes the conversion; the C run
(``_orders.Fix44Run``, the C books) and the Python loop make the same blocks or quarantine
for the same reason; a quarantined message changes nothing; a real adapter core counts no
internal error and publishes the same packets with either.
"""

from __future__ import annotations

from typing import Any, Final
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.formats.fix44.dictionary import Dictionary
from feedha.adapter.formats.fix44.engine import Fix44Engine
from feedha.adapter.formats.fix44.native import fix44_native
from feedha.proto.wire import MAX_SOURCE_SEQ
from tests.fix44_capture import make_capture
from tests.format_fuzz import (
    FIX_NUMBERS,
    fix_body,
    fix_field_setter,
    fix_frame,
    mutate,
    mutations,
    play_core,
    play_engine,
)

needs_native = pytest.mark.skipif(fix44_native() is None, reason="_orders is not built")

SYMBOLS: Final = (b"AAA", b"BB", b"C.D", b"", b"\xff\xfe", b"S" * 300)
PRICES: Final = (b"100", b"100.5", b"99.75", b"0", b"-0", b"-1", b".5", b"1.", b"9" * 40, b"9" * 41, b"1e5")
SIZES: Final = (b"0", b"5", b"10.5", b"-0", b"9" * 19, b"9" * 40, b"-3", b"nan")
INTEGERS: Final = (
    b"0",
    b"1",
    b"2",
    b"5",
    b"9223372036854775807",
    b"9223372036854775808",
    b"9" * 19,
    b"-1",
    b"01",
)
SEQS: Final = (MAX_SOURCE_SEQ - 1, MAX_SOURCE_SEQ, MAX_SOURCE_SEQ + 1, (1 << 64) - 1, 0)
TIMES: Final = (b"20260105-14:30:00.000", b"20260105-14:30:00.123456789", b"20261399-99:99:99", b"2026")
TRAILING: Final = (
    (9999, b"x"), (277, b"A"), (273, b"14:30:00.5"), (83, b"7"), (83, b"9" * 20), (48, b"ID1"), (22, b"8"),
)  # fmt: skip
ENTRY_TYPES: Final = (b"0", b"1") * 6 + (
    b"2",
    b"2",
    b"4",
    b"5",
    b"6",
    b"7",
    b"8",
    b"B",
    b"C",
    b"Q",
    b"Z",
    b"",
)


def _pick(draw: Any, common: tuple[bytes, ...], odd: tuple[bytes, ...]) -> bytes:
    """Mostly a common value, now and then one at a boundary (shrinks towards the first common one)."""
    value: bytes = draw(st.sampled_from(common * 5 + odd))
    return value


@st.composite
def entry(draw: Any, incremental: bool) -> list[tuple[int, bytes]]:
    """One entry of the 268 group: 279 first in a 35=X, 269 first in a 35=W, then any order."""
    fields: list[tuple[int, bytes]] = []
    if incremental:
        fields.append((279, _pick(draw, (b"0", b"1", b"2"), (b"3", b"", b"00", b"9"))))
    fields.append((269, draw(st.sampled_from(ENTRY_TYPES))))
    rest: list[tuple[int, bytes]] = []
    if incremental and draw(st.integers(0, 3)):
        rest.append((55, _pick(draw, SYMBOLS[:3], SYMBOLS[3:])))
    rest.append((270, _pick(draw, PRICES[:7], PRICES[7:] + FIX_NUMBERS)))
    if draw(st.integers(0, 4)):
        rest.append((271, _pick(draw, SIZES[:3], SIZES[3:] + FIX_NUMBERS)))
    if draw(st.integers(0, 3)) == 0:
        rest.append((1023, _pick(draw, (b"1", b"2", b"3"), INTEGERS)))
    if draw(st.integers(0, 5)) == 0:
        rest.append((346, _pick(draw, (b"1", b"3"), INTEGERS)))
    if draw(st.integers(0, 7)) == 0:
        rest.append(draw(st.sampled_from(TRAILING)))
    return fields + draw(st.permutations(rest))


@st.composite
def spec_message(draw: Any, seq: int) -> bytes:
    """One FIX 4.4 message of the stream at ``seq``, written from the layout (see the module docstring)."""
    kind = draw(st.sampled_from((b"X",) * 8 + (b"W", b"W", b"0", b"4", b"A")))
    number = b"%d" % (seq if draw(st.integers(0, 30)) else draw(st.sampled_from(SEQS)))
    head = [
        (35, kind),
        (49, b"VENUE"),
        (56, b"FEEDHA"),
        (34, number),
        (52, _pick(draw, TIMES[:2], TIMES[2:])),
    ]
    if draw(st.integers(0, 5)) == 0:
        head.append((60, _pick(draw, TIMES[:2], TIMES[2:])))
    if kind == b"4":
        return fix_frame(fix_body([*head, (36, b"%d" % (seq + draw(st.sampled_from((1, 2, 0, -5)))))]))
    if kind not in (b"X", b"W"):
        return fix_frame(fix_body(head))
    entries = draw(
        st.lists(entry(kind == b"X"), min_size=0 if draw(st.integers(0, 20)) == 0 else 1, max_size=6)
    )
    count = len(entries) + draw(st.sampled_from((0,) * 12 + (1, -1)))
    body = head + ([(55, _pick(draw, SYMBOLS[:3], SYMBOLS[3:]))] if kind == b"W" else [])
    body += [(268, b"%d" % count)] + [pair for item in entries for pair in item]
    begin = b"FIXT.1.1" if draw(st.integers(0, 9)) == 0 else b"FIX.4.4"
    return fix_frame(fix_body(body), begin)


@st.composite
def spec_stream(draw: Any) -> list[bytes]:
    """Opening full refreshes of a price-keyed and a level-indexed book, then drawn messages."""
    opening = [
        fix_frame(fix_body([(35, b"W"), (34, b"1"), (52, TIMES[0]), (55, b"AAA"), (268, b"2"), (269, b"0"),
                            (270, b"99"), (271, b"5"), (269, b"1"), (270, b"101"), (271, b"6")])),
        fix_frame(fix_body([(35, b"W"), (34, b"2"), (52, TIMES[0]), (55, b"BB"), (268, b"1"), (269, b"0"),
                            (270, b"99"), (271, b"5"), (1023, b"1")])),
    ]  # fmt: skip
    count = draw(st.integers(1, 25))
    return opening + [draw(spec_message(seq)) for seq in range(3, 3 + count)]


def _frames(draw: Any, messages: list[bytes]) -> list[bytes]:
    """The messages cut into source frames of 1 to 8 messages back to back."""
    frames, at = [], 0
    while at < len(messages):
        size = draw(st.integers(1, 8))
        frames.append(b"".join(messages[at : at + size]))
        at += size
    return frames


DICTIONARY: Final = Dictionary.load()


def _engines(depth: int) -> list[Fix44Engine]:
    # The packaged dictionary read once (each engine reads it: YAML).
    with mock.patch.object(Dictionary, "load", lambda *_a, **_k: DICTIONARY):
        return [Fix44Engine(depth=depth, prefer_native=native) for native in (True, False)]


CAPTURE: Final = make_capture(symbols=8, messages=150, seed=11).messages
fix_field = fix_field_setter((9, 34, 268, 10, 270, 271, 1023, 346, 279, 269, 55, 36, 52, 60))


def _check_spec_stream(data: Any) -> None:
    frames = _frames(data.draw, data.draw(spec_stream()))
    depth = data.draw(st.integers(1, 4))
    native, python = (play_engine(engine, frames) for engine in _engines(depth))
    assert native == python


def _check_mutated_capture(data: Any) -> None:
    start = data.draw(st.integers(0, len(CAPTURE) - 10))
    window = CAPTURE[start : start + 40]
    messages = mutate(window, data.draw(st.lists(mutations(), min_size=1, max_size=6)), fix_field)
    frames = _frames(data.draw, messages)
    native, python = (play_core(engine, frames) for engine in _engines(3))
    assert native == python
    native_events, python_events = (play_engine(engine, frames) for engine in _engines(3))
    assert native_events == python_events


@needs_native
@settings(max_examples=30)
@given(st.data())
def test_messages_at_the_boundaries_of_their_fields_convert_alike_in_c_and_python(data: Any) -> None:
    _check_spec_stream(data)


@needs_native
@settings(max_examples=25)
@given(st.data())
def test_mutated_captures_cost_only_themselves_in_an_adapter_core(data: Any) -> None:
    _check_mutated_capture(data)


@pytest.mark.slow  # the default suite keeps the two tests above (55 examples, ~5 s)
@pytest.mark.timeout(900)
@needs_native
@settings(max_examples=2000)
@given(st.data())
def test_long_fuzz(data: Any) -> None:
    if data.draw(st.booleans()):
        _check_spec_stream(data)
    else:
        _check_mutated_capture(data)
