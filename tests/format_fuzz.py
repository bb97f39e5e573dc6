"""Fuzzing the input formats: hostile frames through an engine and through an adapter core, C against Python.

Two harnesses, each run once with the C extensions and once with the Python references:

* :func:`play_engine` converts frames as the adapter core's pipeline does -- the engine's runs,
  and the careful path one message at a time (parse, stage, encode, the block-size check) --
  and records what became of every message: its block and the digest after it, or its
  quarantine reason, a skip, a reset, a malformed stretch. It fails on any exception but the
  ones the pipeline expects (``ConversionError`` from the careful path, ``FixError`` from a
  SequenceReset's decoding), and on a quarantined message that changed the state (digest or
  values). Two engines agree when their records are equal: the same blocks or the same reasons.
* :func:`play_core` feeds the frames to a real :class:`~adapter.core.AdapterCore` (active,
  journaling) and returns what it published and quarantined, its counters and its state; an
  internal error (an exception the pipeline caught) fails it.

:func:`mutate` applies byte mutations to real messages -- flip a bit, truncate, extend, splice
two messages, repeat, drop, and set a format's own length or number field to a boundary --
so each format's test module only says where its fields are (:class:`FieldSetter`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any, Final

from hypothesis import strategies as st

from feedha.adapter.conversion.engine import ConversionEngine, Stop
from feedha.adapter.core import AdapterCore, CoreConfig, Publish, Quarantine
from feedha.adapter.core.sync_types import Role
from feedha.adapter.errors import ConversionError
from feedha.proto import fix, wire

NOW_NS: Final = 1_790_000_000_000_000_000
_BLOCK_LENGTH: Final = struct.Struct(">H")
Event = tuple[Any, ...]
FieldSetter = Callable[[bytes, int, int], bytes]  # (message, which field, which boundary) -> message


def _split_blocks(blocks: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(blocks):
        (length,) = _BLOCK_LENGTH.unpack_from(blocks, pos)
        out.append(blocks[pos : pos + 2 + length])
        pos += 2 + length
    return out


def _state_of(engine: ConversionEngine) -> tuple[int, Any]:
    return engine.state.digest, engine.state.snapshot()


def _careful(engine: ConversionEngine, body: bytes) -> Event:
    """One message through the careful path, as ``Pipeline._careful`` takes it (sequencing aside)."""
    before = _state_of(engine)
    try:
        msg = engine.parse(body)
    except ConversionError as exc:
        try:
            reset = engine.decode_reset(body)
        except fix.FixError:
            return ("quarantine", "bad_sequence_reset")
        assert _state_of(engine) == before, (
            f"parsing a message that is refused ({exc.reason}) changed the state"
        )
        if reset is not None:
            return ("reset", *reset)
        try:
            seq: int | None = engine.peek_seq(body)
        except ConversionError:
            seq = None
        return ("skipped" if exc.reason == "skipped" else "quarantine", exc.reason, seq)
    try:
        staged = engine.state.stage(msg)
        payload = engine.encode_staged(msg, staged, 1)
        if len(payload) > wire.MAX_PAYLOAD:
            raise ConversionError("oversize", f"{len(payload)} bytes")
    except ConversionError as exc:
        assert _state_of(engine) == before, f"a message quarantined ({exc.reason}) changed the state"
        return ("quarantine", exc.reason, msg.source_seq)
    engine.state.commit(staged)
    return ("block", wire.encode_block(1, msg.source_seq, payload), engine.state.digest)


def play_engine(engine: ConversionEngine, frames: Sequence[bytes]) -> list[Event]:
    """What became of every message of ``frames`` (see the module docstring)."""
    events: list[Event] = []
    run = engine.run_function()
    for raw in frames:
        frame = engine.source_frame(raw)
        pos = 0
        while pos < len(frame):
            pos, _count, stop, blocks, _first, digests, _payloads = run(
                frame, pos, 0, 0, 1 << 20, 1 << 20, 1, 1, True, False
            )
            for block, digest in zip(_split_blocks(blocks), memoryview(digests).cast("Q"), strict=True):
                events.append(("block", block, digest))
            if stop != Stop.SLOW:
                continue
            body, after = engine.next_message(frame, pos)
            if body is None:
                events.append(("malformed", engine.find_seq(frame[pos:after])))
            else:
                events.append(_careful(engine, body))
            pos = after
    return events


def play_core(
    engine: ConversionEngine, frames: Sequence[bytes], *, max_packet_bytes: int = 2048
) -> dict[str, Any]:
    """The frames through an active, journaling adapter core: what it published, quarantined and holds."""
    config = CoreConfig(
        channel_number=1, adapter=1, source_stream_number=7, max_packet_bytes=max_packet_bytes, journal=True
    )
    core = AdapterCore(config, engine, now=0.0)
    core.force_role(Role.ACTIVE, now=0.0)
    actions = []
    for frame in frames:
        actions += core.on_source([b"T", frame], now=1.0, wall_ns=NOW_NS)
    actions += core.on_tick(now=1.0, wall_ns=NOW_NS)
    counters = core.pipeline.counters.as_dict()
    assert counters["internal_errors"] == 0, counters
    return {
        "packets": [a.packet for a in actions if isinstance(a, Publish)],
        "quarantined": [(a.reason, a.source_seq, a.size) for a in actions if isinstance(a, Quarantine)],
        "counters": counters,
        "last_source_seq": core.sequencer.last_source_seq,
        "next_msg_seq": core.sequencer.next_msg_seq,
        "digest": core.state.digest,
        "state": core.state.snapshot(),
    }


# ---- byte mutations ------------------------------------------------------------------------------

FIELD_COUNT: Final = 64  # a field setter takes ``which % its field count``
BOUNDARY_COUNT: Final = 16  # and ``boundary % its boundary count``


@st.composite
def mutations(draw: Any) -> tuple[Any, ...]:
    """One mutation, with the positions it needs drawn as plain integers (taken modulo lengths)."""
    index = st.integers(0, 1 << 16)
    return draw(
        st.one_of(
            st.tuples(st.just("flip"), index, index, st.integers(0, 7)),
            st.tuples(st.just("truncate"), index, index),
            st.tuples(st.just("extend"), index, st.binary(min_size=1, max_size=48)),
            st.tuples(st.just("splice"), index, index, index, index),
            st.tuples(st.just("repeat"), index),
            st.tuples(st.just("drop"), index),
            st.tuples(
                st.just("field"), index, st.integers(0, FIELD_COUNT - 1), st.integers(0, BOUNDARY_COUNT - 1)
            ),
            st.tuples(
                st.just("field"), index, st.integers(0, FIELD_COUNT - 1), st.integers(0, BOUNDARY_COUNT - 1)
            ),
        )
    )


def mutate(
    messages: Sequence[bytes], edits: Sequence[tuple[Any, ...]], set_field: FieldSetter
) -> list[bytes]:
    """``messages`` with ``edits`` (from :func:`mutations`) applied, in order."""
    out = list(messages)
    for edit in edits:
        if not out:
            break
        kind, at = edit[0], edit[1] % len(out)
        message = out[at]
        if kind == "flip" and message:
            offset = edit[2] % len(message)
            out[at] = message[:offset] + bytes([message[offset] ^ (1 << edit[3])]) + message[offset + 1 :]
        elif kind == "truncate":
            out[at] = message[: edit[2] % (len(message) + 1)]
        elif kind == "extend":
            out[at] = message + edit[2]
        elif kind == "splice":
            other = out[edit[2] % len(out)]
            out[at] = message[: edit[3] % (len(message) + 1)] + other[edit[4] % (len(other) + 1) :]
        elif kind == "repeat":
            out.insert(at, message)
        elif kind == "drop":
            del out[at]
        elif kind == "field":
            out[at] = set_field(message, edit[2], edit[3])
    return out


def boundaries(width_bits: int) -> list[int]:
    """The boundary values of an unsigned field: 0, 1, max - 1, max, and the sign bit's neighbours."""
    top = (1 << width_bits) - 1
    return [0, 1, top - 1, top, 1 << (width_bits - 1), (1 << (width_bits - 1)) - 1]


# ---- FIX tag=value, framed by hand ----------------------------------------------------------------

SOH: Final = b"\x01"
FIX_NUMBERS: Final = (
    b"0", b"1", b"-1", b"2147483647", b"2147483648", b"9007199254740993", b"9223372036854775806",
    b"9223372036854775807", b"9223372036854775808", b"18446744073709551615", b"18446744073709551616",
    b"1" + b"0" * 40, b"9" * 5000, b"", b"00001", b"+5", b" 5", b"1_0", b"1e5", b"nan", b"inf", b"-0",
    b"0.0000000000000000000001", b"1.", b".5", b"\xff", b"=",
)  # fmt: skip


def fix_frame(body: bytes, begin: bytes = b"FIX.4.4") -> bytes:
    """A FIX message around ``body``: 8= BeginString, 9= BodyLength and 10= CheckSum counted here."""
    head = b"8=" + begin + SOH + b"9=%d" % len(body) + SOH
    return head + body + b"10=%03d" % (sum(head + body) % 256) + SOH


def fix_body(fields: Sequence[tuple[int, bytes]]) -> bytes:
    """``tag=value`` fields joined by SOH, the last one ended by it too."""
    return b"".join(b"%d=%s\x01" % (tag, value) for tag, value in fields)


def fix_field_setter(tags: Sequence[int]) -> FieldSetter:
    """A setter of FIX fields: 9= to a length near the true one, or one of ``tags`` to a number.

    ``which`` below :data:`FIELD_COUNT` / 2 keeps the framing as it is (the value may make the
    message malformed); above it, 9= and 10= are counted again so the value reaches the parser.
    """

    def set_field(message: bytes, which: int, boundary: int) -> bytes:
        if which == 0:
            return _set_body_length(message, boundary)
        tag = tags[which % len(tags)]
        key = b"\x01%d=" % tag
        start = message.find(key)
        if start < 0:
            return message
        start += len(key)
        end = message.find(SOH, start)
        end = len(message) if end < 0 else end
        value = FIX_NUMBERS[(boundary * 7 + which) % len(FIX_NUMBERS)]
        changed = message[:start] + value + message[end:]
        if which < FIELD_COUNT // 2:
            return changed
        body_start = changed.find(SOH + b"35=")
        trailer = changed.rfind(b"\x0110=")
        if body_start < 0 or trailer <= body_start:
            return changed
        return fix_frame(changed[body_start + 1 : trailer + 1])

    return set_field


def _set_body_length(message: bytes, boundary: int) -> bytes:
    # 9= at the boundaries of its field: 0, 1, the true length -1 / +1, five and six digits, more.
    start = message.find(b"\x019=")
    if start < 0:
        return message
    start += 3
    end = message.find(SOH, start)
    if end < 0:
        return message
    true = len(message) - end - 1 - len(b"10=000\x01")
    lengths = (0, 1, true - 1, true + 1, 99_999, 999_999, 9_999_999, -true, 1 << 64)
    return message[:start] + b"%d" % lengths[boundary % len(lengths)] + message[end:]
