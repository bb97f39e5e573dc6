"""Fuzzing itch50: ITCH 5.0 messages and MoldUDP64 packets laid out by hand, and mutated captures.

Every message type of the specification ("Nasdaq TotalView-ITCH 5.0", section 1) is written
here from its layout (:data:`LAYOUTS`: each field's offset and width), with values at the
boundaries of their widths, and packed into MoldUDP64 downstream packets whose header
(session, sequence number, message count) and message-block lengths are set by hand too --
to every boundary of their fields: 0, 1, max - 1, max, and one past the message or packet.
The seeded captures of ``adapter/formats/itch50/day.py`` are mutated byte by byte.

What must hold (``tests/format_fuzz.py``): no exception escapes the conversion; the C run
and order table and the Python ones make the same blocks or quarantine for the same reason;
a quarantined message changes nothing; a real adapter core counts no internal error and
publishes the same packets with either. The default suite runs a few seconds of each; the
slow stage (``test_long_fuzz``) runs many more examples.
"""

from __future__ import annotations

import struct
from typing import Any, Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.conversion import choice
from feedha.adapter.formats.itch50.day import make_itch_capture
from feedha.adapter.formats.itch50.engine import Itch50Engine
from feedha.proto import moldudp64
from feedha.proto.wire import MAX_SOURCE_SEQ
from tests.format_fuzz import boundaries, mutate, mutations, play_core, play_engine

needs_native = pytest.mark.skipif(choice.make_order_store().run is None, reason="_orders is not built")

# Type -> (length, fields after the 11-byte header: (offset, width, kind)); kinds: u (unsigned
# integer), ref, shares, price, stock (alpha 8), side (B/S), flag (Y/N), alpha (any letters).
LAYOUTS: Final[dict[bytes, tuple[int, tuple[tuple[int, int, str], ...]]]] = {
    b"S": (12, ((11, 1, "alpha"),)),
    b"R": (39, ((11, 8, "stock"), (19, 1, "alpha"), (20, 1, "alpha"), (21, 4, "u"), (25, 1, "flag"),
                (26, 1, "alpha"), (27, 2, "alpha"), (29, 1, "alpha"), (30, 1, "alpha"), (31, 1, "alpha"),
                (32, 1, "alpha"), (33, 1, "alpha"), (34, 4, "u"), (38, 1, "alpha"))),
    b"H": (25, ((11, 8, "stock"), (19, 1, "alpha"), (20, 1, "alpha"), (21, 4, "alpha"))),
    b"Y": (20, ((11, 8, "stock"), (19, 1, "alpha"))),
    b"L": (26, ((11, 4, "alpha"), (15, 8, "stock"), (23, 1, "flag"), (24, 1, "alpha"), (25, 1, "alpha"))),
    b"V": (35, ((11, 8, "u"), (19, 8, "u"), (27, 8, "u"))),
    b"W": (12, ((11, 1, "alpha"),)),
    b"K": (28, ((11, 8, "stock"), (19, 4, "u"), (23, 1, "alpha"), (24, 4, "price"))),
    b"J": (35, ((11, 8, "stock"), (19, 4, "price"), (23, 4, "price"), (27, 4, "price"), (31, 4, "u"))),
    b"h": (21, ((11, 8, "stock"), (19, 1, "alpha"), (20, 1, "alpha"))),
    b"A": (36, ((11, 8, "ref"), (19, 1, "side"), (20, 4, "shares"), (24, 8, "stock"), (32, 4, "price"))),
    b"F": (40, ((11, 8, "ref"), (19, 1, "side"), (20, 4, "shares"), (24, 8, "stock"), (32, 4, "price"),
                (36, 4, "alpha"))),
    b"E": (31, ((11, 8, "ref"), (19, 4, "shares"), (23, 8, "u"))),
    b"C": (36, ((11, 8, "ref"), (19, 4, "shares"), (23, 8, "u"), (31, 1, "flag"), (32, 4, "price"))),
    b"X": (23, ((11, 8, "ref"), (19, 4, "shares"))),
    b"D": (19, ((11, 8, "ref"),)),
    b"U": (35, ((11, 8, "ref"), (19, 8, "ref"), (27, 4, "shares"), (31, 4, "price"))),
    b"P": (44, ((11, 8, "u"), (19, 1, "side"), (20, 4, "shares"), (24, 8, "stock"), (32, 4, "price"),
                (36, 8, "u"))),
    b"Q": (40, ((11, 8, "shares"), (19, 8, "stock"), (27, 4, "price"), (31, 8, "u"), (39, 1, "alpha"))),
    b"B": (19, ((11, 8, "u"),)),
    b"I": (50, ((11, 8, "shares"), (19, 8, "shares"), (27, 1, "alpha"), (28, 8, "stock"), (36, 4, "price"),
                (40, 4, "price"), (44, 4, "price"), (48, 1, "alpha"), (49, 1, "alpha"))),
    b"N": (20, ((11, 8, "stock"), (19, 1, "alpha"))),
    b"O": (48, ((11, 8, "stock"), (19, 1, "alpha"), (20, 4, "price"), (24, 4, "price"), (28, 4, "price"),
                (32, 8, "u"), (40, 4, "price"), (44, 4, "price"))),
}  # fmt: skip
# The types that move books, drawn more often than the rest.
BOOK_TYPES: Final = (b"R", b"A", b"A", b"A", b"F", b"E", b"C", b"X", b"D", b"U", b"P", b"Q") * 3
STOCKS: Final = (b"AAA", b"BB", b"ZZZ", b"", b"C\xe9", b"DDDDDDDD", b" AAA", b"AAA\x00")
MAX_U16: Final = 0xFFFF


def _value(draw: Any, width: int, kind: str) -> bytes:
    if kind in ("stock", "alpha", "side", "flag"):
        choices = {
            "stock": STOCKS, "side": (b"B", b"S", b"B", b"S", b" ", b"X"), "flag": (b"Y", b"N", b"Y", b"?"),
            "alpha": (b"", b"A", b"Q", b" ", b"\x00", b"\xff"),
        }[kind]  # fmt: skip
        return draw(st.sampled_from(choices)).ljust(width, b" ")[:width]
    small = {
        "ref": st.integers(1, 12),
        "shares": st.integers(0, 500),
        "price": st.integers(1, 30).map(lambda n: n * 100),
    }
    pick = st.sampled_from(boundaries(8 * width))
    if kind not in small:
        return int(draw(pick)).to_bytes(width, "big")
    value = draw(st.one_of(small[kind], small[kind], small[kind], pick))  # mostly a value that meets others
    return int(value).to_bytes(width, "big")


@st.composite
def spec_message(draw: Any) -> bytes:
    """One ITCH 5.0 message of any type, laid out from :data:`LAYOUTS`; now and then a byte too
    short or too long, or of a type the specification does not define."""
    kind = draw(st.sampled_from(BOOK_TYPES + tuple(LAYOUTS)))
    length, fields = LAYOUTS[kind]
    buf = bytearray(length)
    buf[0:1] = kind
    struct.pack_into(">HH", buf, 1, draw(st.sampled_from((1, 2, 0, MAX_U16))), draw(st.integers(0, MAX_U16)))
    buf[5:11] = draw(st.sampled_from((0, 1, 34_200 * 10**9, (1 << 48) - 1))).to_bytes(6, "big")
    for offset, width, field_kind in fields:
        buf[offset : offset + width] = _value(draw, width, field_kind)
    roll = draw(st.integers(0, 19))
    if roll == 0:
        return bytes(buf[:-1])
    if roll == 1:
        return bytes(buf) + b"\x00"
    if roll == 2:
        return draw(st.sampled_from((b"~", b"a", b"\x00", b"Z"))) + bytes(buf[1:])
    return bytes(buf)


def itch_field(message: bytes, which: int, boundary: int) -> bytes:
    """Set one integer field of ``message`` (by its type's layout) to a boundary of its width."""
    layout = LAYOUTS.get(message[:1])
    texts = ("stock", "alpha", "side", "flag")
    fields = [(1, 2), (3, 2), (5, 6)] + [
        (o, w) for o, w, k in (layout[1] if layout else ()) if k not in texts
    ]
    offset, width = fields[which % len(fields)]
    if offset + width > len(message):
        return message
    values = boundaries(8 * width)
    return (
        message[:offset] + values[boundary % len(values)].to_bytes(width, "big") + message[offset + width :]
    )


SEQUENCES: Final = (0, 1, MAX_SOURCE_SEQ - 1, MAX_SOURCE_SEQ, MAX_SOURCE_SEQ + 1, (1 << 64) - 1)


@st.composite
def packets(draw: Any, messages: list[bytes]) -> list[bytes]:
    """``messages`` in MoldUDP64 packets written here (header ``>10sQH``, then ``>H`` and the
    message), numbered from 1; now and then a header's count or sequence, or a message block's
    length, set to a boundary, or the packet cut short."""
    out, at = [], 0
    while at < len(messages):
        chunk = messages[at : at + draw(st.integers(1, 12))]
        sequence, count = at + 1, len(chunk)
        edit = draw(st.integers(0, 24))
        if edit == 0:
            sequence = draw(st.sampled_from(SEQUENCES))
        elif edit == 1:
            count = draw(st.sampled_from((0, 1, count - 1, count + 1, MAX_U16 - 1, MAX_U16)))
        lengths = [len(m) for m in chunk]
        if edit == 2:
            index = draw(st.integers(0, len(chunk) - 1))
            lengths[index] = draw(
                st.sampled_from((0, 1, lengths[index] - 1, lengths[index] + 1, MAX_U16 - 1, MAX_U16))
            )
        blocks = b"".join(
            struct.pack(">H", max(0, n) & MAX_U16) + m for n, m in zip(lengths, chunk, strict=True)
        )
        packet = struct.pack(">10sQH", b"FUZZ      ", sequence, count & MAX_U16) + blocks
        if edit == 3:
            packet = packet[: draw(st.integers(0, len(packet)))]
        out.append(packet)
        at += len(chunk)
    return out


def _engines(max_orders: int) -> list[Itch50Engine]:
    return [Itch50Engine(depth=3, max_orders=max_orders, prefer_native=native) for native in (True, False)]


def _capture(seed: int) -> list[bytes]:
    capture = make_itch_capture(symbols=6, orders=60, seed=seed)
    return list(moldudp64.read_binary_file(capture.data))


CAPTURES: Final = {seed: _capture(seed) for seed in (1, 2)}


def _check_spec_stream(data: Any) -> None:
    messages = data.draw(st.lists(spec_message(), min_size=1, max_size=40))
    frames = data.draw(packets(messages))
    max_orders = data.draw(st.integers(2, 40))
    native, python = (play_engine(engine, frames) for engine in _engines(max_orders))
    assert native == python


def _check_mutated_capture(data: Any) -> None:
    base = CAPTURES[data.draw(st.sampled_from(sorted(CAPTURES)))]
    start = data.draw(st.integers(0, len(base) - 20))
    window = base[:8] + base[max(start, 8) : max(start, 8) + 60]  # the directory, then a stretch of the day
    messages = mutate(window, data.draw(st.lists(mutations(), min_size=1, max_size=6)), itch_field)
    frames = data.draw(packets(messages))
    native, python = (play_core(engine, frames) for engine in _engines(data.draw(st.integers(5, 200))))
    assert native == python
    native_events, python_events = (play_engine(engine, frames) for engine in _engines(200))
    assert native_events == python_events


@needs_native
@settings(max_examples=50)
@given(st.data())
def test_messages_of_every_type_at_their_boundaries_convert_alike_in_c_and_python(data: Any) -> None:
    _check_spec_stream(data)


@needs_native
@settings(max_examples=25)
@given(st.data())
def test_mutated_captures_cost_only_themselves_in_an_adapter_core(data: Any) -> None:
    _check_mutated_capture(data)


@pytest.mark.slow  # the default suite keeps the two tests above (75 examples, ~6 s)
@pytest.mark.timeout(900)
@needs_native
@settings(max_examples=2000)
@given(st.data())
def test_long_fuzz(data: Any) -> None:
    if data.draw(st.booleans()):
        _check_spec_stream(data)
    else:
        _check_mutated_capture(data)
