"""Fuzzing feedha-fix: docs/wire-format.md's source format (section 3) framed by hand, and mutated streams.

Messages are written here from the documented layout -- ``8=FIX.4.4|9=<body length>|35=X|
49=|34=|52=|55=|60=|268=<n>|{279=0|269=|270=|271=|}*n|10=<checksum>|`` -- with ``9=`` and
``10=`` counted by ``tests.format_fuzz.fix_frame``, not by ``proto.fix``, and values drawn at
their boundaries (sequence numbers around ``MAX_SOURCE_SEQ``, prices and sizes past int64 and
double, counts off by one, symbols empty, long or not UTF-8); SequenceResets (``35=4``) among
them. Streams of the plain source's own messages are mutated byte by byte, their length
fields set to boundaries.

What must hold (``tests/format_fuzz.py``): no exception escapes the conversion; the C fast
path and the Python engine make the same blocks or quarantine for the same reason; a
quarantined message changes nothing; a real adapter core counts no internal error and
publishes the same packets with either.
"""

from __future__ import annotations

from typing import Any, Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.conversion.engine import ConversionEngine
from feedha.adapter.formats.feedha_fix.choice import make_engine
from feedha.adapter.formats.feedha_fix.table import ConverterTable
from feedha.plain_source.model import SymbolModel
from feedha.proto.wire import MAX_SOURCE_SEQ
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

TABLE: Final = ConverterTable.load()
needs_native = pytest.mark.skipif(not make_engine(TABLE).is_native, reason="_fastpath is not built")

SYMBOLS: Final = (b"AAA", b"BB", b"IBM", b"", b"\xff\xfe", b"P" * 70_000, b"A B")
PRICES: Final = (b"101.25", b"0", b"-1.5", b"1e308", b"1e309", b"-0", b"nan", b"9" * 400)
SIZES: Final = (b"100", b"0", b"1", b"-1", b"9223372036854775807", b"9223372036854775808", b"1" + b"0" * 40)
TIMES: Final = (b"20260105-14:30:00.000000000", b"20260105-14:30:00", b"99991231-23:59:59.999999999", b"0")
SEQS: Final = (MAX_SOURCE_SEQ - 1, MAX_SOURCE_SEQ, MAX_SOURCE_SEQ + 1, (1 << 64) + 1, 0)


def _pick(draw: Any, values: tuple[bytes, ...], common: int = 1) -> bytes:
    """The first ``common`` values most of the time, the others now and then."""
    value: bytes = draw(st.sampled_from(values[:common] * 6 + values[common:] + FIX_NUMBERS[:4]))
    return value


@st.composite
def spec_message(draw: Any, seq: int) -> bytes:
    """One message of the stream at ``seq``, laid out as docs/wire-format.md writes it."""
    number = seq if draw(st.integers(0, 30)) else draw(st.sampled_from(SEQS))
    if draw(st.integers(0, 25)) == 0:  # a SequenceReset: 36= the number of the message after it
        new = draw(
            st.sampled_from((b"%d" % (seq + 1), b"%d" % (seq + 3), b"%d" % seq, b"%d" % MAX_SOURCE_SEQ))
        )
        return fix_frame(fix_body([(35, b"4"), (34, b"%d" % number), (36, new)]))
    entries = []
    for _ in range(draw(st.integers(0, 4))):
        entries += [(279, b"0"), (269, draw(st.sampled_from((b"0", b"1", b"2", b"2", b"9", b""))))]
        entries += [(270, _pick(draw, PRICES)), (271, _pick(draw, SIZES))]
    count = len(entries) // 4 + draw(st.sampled_from((0,) * 12 + (1, -1)))
    head = [(35, b"X"), (49, b"SRC"), (34, b"%d" % number), (52, TIMES[0]), (55, _pick(draw, SYMBOLS, 3))]
    head.append((60, _pick(draw, TIMES)))
    return fix_frame(fix_body([*head, (268, b"%d" % count), *entries]))


def _frames(draw: Any, messages: list[bytes]) -> list[bytes]:
    frames, at = [], 0
    while at < len(messages):
        size = draw(st.integers(1, 8))
        frames.append(b"".join(messages[at : at + size]))
        at += size
    return frames


def _engines() -> list[ConversionEngine]:
    return [make_engine(TABLE, prefer_native=native) for native in (True, False)]


STREAM: Final = [
    m.data
    for m in SymbolModel(
        streams=["A-Z"], symbol_count=5, seed=5, epoch_ns=1_790_000_000 * 10**9
    ).generate_messages(120)
]
fix_field = fix_field_setter((9, 34, 268, 10, 270, 271, 269, 55, 60, 36, 279))


def _check_spec_stream(data: Any) -> None:
    messages = [data.draw(spec_message(seq)) for seq in range(1, 1 + data.draw(st.integers(1, 30)))]
    frames = _frames(data.draw, messages)
    native, python = (play_engine(engine, frames) for engine in _engines())
    assert native == python
    native_core, python_core = (play_core(engine, frames) for engine in _engines())
    assert native_core == python_core


def _check_mutated_stream(data: Any) -> None:
    start = data.draw(st.integers(0, len(STREAM) - 10))
    messages = mutate(
        STREAM[start : start + 50], data.draw(st.lists(mutations(), min_size=1, max_size=6)), fix_field
    )
    frames = _frames(data.draw, messages)
    native, python = (play_core(engine, frames) for engine in _engines())
    assert native == python
    native_events, python_events = (play_engine(engine, frames) for engine in _engines())
    assert native_events == python_events


@needs_native
@settings(max_examples=30)
@given(st.data())
def test_messages_at_the_boundaries_of_their_fields_convert_alike_in_c_and_python(data: Any) -> None:
    _check_spec_stream(data)


@needs_native
@settings(max_examples=30)
@given(st.data())
def test_mutated_streams_cost_only_themselves_in_an_adapter_core(data: Any) -> None:
    _check_mutated_stream(data)


@pytest.mark.slow  # the default suite keeps the two tests above (60 examples, a few seconds)
@pytest.mark.timeout(900)
@needs_native
@settings(max_examples=2000)
@given(st.data())
def test_long_fuzz(data: Any) -> None:
    if data.draw(st.booleans()):
        _check_spec_stream(data)
    else:
        _check_mutated_stream(data)
