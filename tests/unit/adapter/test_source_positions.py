"""Source positions and times past what a run or a block holds: quarantined in every format, no stall.

A source position (``source_seq``) is at most ``proto.wire.MAX_SOURCE_SEQ`` (2**63 - 2), so
the position after the last one is still an int64, which the C runs take as the next one
expected. Before the bound, a SequenceReset to 10**30, a MoldUDP64 packet numbered near
2**63 or a 34= of 5,000 digits raised out of every later conversion (an internal fault a
frame: five in a minute fail the adapter, and every adapter of the group reads the same
source). The messages here are written by hand at the layouts of the public specifications
(FIX tag=value with its BodyLength and CheckSum, MoldUDP64's header, ITCH 5.0's ``D``).
"""

from __future__ import annotations

import struct
from typing import Any

import pytest

from feedha.adapter.conversion import peek_source_seq
from feedha.adapter.core import AdapterCore, CoreConfig, Publish
from feedha.adapter.core.sync_types import Role
from feedha.adapter.errors import ConversionError
from feedha.adapter.formats.feedha_fix.choice import make_engine
from feedha.adapter.formats.feedha_fix.table import ConverterTable
from feedha.adapter.formats.fix44.engine import Fix44Engine
from feedha.adapter.formats.itch50.engine import Itch50Engine
from feedha.proto import fix
from feedha.proto.wire import MAX_SOURCE_SEQ

NOW_NS = 1_790_000_000_000_000_000


def _fix(body: bytes, begin: bytes = b"FIX.4.4") -> bytes:
    """A FIX message around ``body`` (fields joined by SOH), its 9= and 10= counted here."""
    head = b"8=%s\x019=%d\x01" % (begin, len(body))
    return head + body + b"10=%03d\x01" % (sum(head + body) % 256)


def _feedha(seq: int | bytes, symbol: bytes = b"AAA") -> bytes:
    number = seq if isinstance(seq, bytes) else b"%d" % seq
    return _fix(
        b"35=X\x0149=SRC\x0134=" + number + b"\x0152=20260105-14:30:00.000\x0155=" + symbol
        + b"\x0160=20260105-14:30:00.000\x01268=1\x01279=0\x01269=0\x01270=1.5\x01271=10\x01"
    )  # fmt: skip


def _fix44(seq: int | bytes) -> bytes:
    number = seq if isinstance(seq, bytes) else b"%d" % seq
    return _fix(
        b"35=X\x0149=VENUE\x0156=FEEDHA\x0134=" + number + b"\x0152=20260105-14:30:00.000\x01"
        b"268=1\x01279=0\x01269=0\x0155=AAA\x01270=101.5\x01271=10\x01"
    )


def _reset(seq: int, new_seq: bytes) -> bytes:
    return _fix(b"35=4\x0134=%d\x0136=%s\x01" % (seq, new_seq))


def _itch_packet(sequence: int, count: int, start: int = 1) -> bytes:
    """A MoldUDP64 packet (header: session, sequence, count) of ITCH ``R`` then ``A`` messages."""
    messages = []
    for ref in range(start, start + count):
        if ref == 1:
            message = struct.pack(">cHH6s8s2sIc", b"R", 1, 0, bytes(6), b"AAA     ", b"QN", 100, b"N")
            messages.append(message.ljust(39, b" "))
        else:
            messages.append(
                struct.pack(">cHH6sQcI8sI", b"A", 1, 0, bytes(6), ref, b"B", 100, b"AAA     ", 10_000)
            )
    blocks = b"".join(struct.pack(">H", len(m)) + m for m in messages)
    return struct.pack(">10sQH", b"FEEDHA    ", sequence, count) + blocks


def _core(input_format: str, native: bool) -> AdapterCore:
    engine: Any
    if input_format == "feedha-fix":
        engine = make_engine(ConverterTable.load(), prefer_native=native)
    elif input_format == "fix44":
        engine = Fix44Engine(depth=5, prefer_native=native)
    else:
        engine = Itch50Engine(depth=5, prefer_native=native)
    config = CoreConfig(channel_number=1, adapter=1, source_stream_number=7, journal=True)
    core = AdapterCore(config, engine, now=0.0)
    core.force_role(Role.ACTIVE, now=0.0)
    return core


def _play(core: AdapterCore, frames: list[bytes]) -> tuple[dict[str, Any], int]:
    published = 0
    for frame in frames:
        actions = core.on_source([b"A-Z", frame], now=1.0, wall_ns=NOW_NS)
        published += sum(1 for a in actions if isinstance(a, Publish))
    counters = core.pipeline.counters.as_dict()
    assert counters["internal_errors"] == 0, counters
    return counters, core.sequencer.last_source_seq


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("new_seq", [b"%d" % 10**30, b"%d" % (MAX_SOURCE_SEQ + 1), b"9" * 5000, b"+7", b"07"])
def test_a_reset_past_the_highest_position_is_quarantined_and_the_stream_goes_on(
    native: bool, new_seq: bytes
) -> None:
    core = _core("feedha-fix", native)
    counters, last = _play(core, [_feedha(1), _feedha(2), _reset(3, new_seq), _feedha(4), _feedha(5)])
    assert counters["quarantined"] == {"bad_sequence_reset": 1} and counters["numbered"] == 4
    assert last == 5  # the reset used up its own position


@pytest.mark.parametrize("native", [True, False])
def test_a_reset_to_the_highest_position_takes_it_and_nothing_past_it(native: bool) -> None:
    core = _core("feedha-fix", native)
    frames = [
        _feedha(1),
        _reset(2, b"%d" % MAX_SOURCE_SEQ),
        _feedha(MAX_SOURCE_SEQ),
        _feedha(MAX_SOURCE_SEQ + 1),
    ]
    counters, last = _play(core, frames)
    assert last == MAX_SOURCE_SEQ and counters["numbered"] == 2
    assert counters["quarantined"] == {"bad_seq": 1} and counters["source_resets"] == 1


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("input_format", ["feedha-fix", "fix44"])
def test_a_header_numbered_past_the_highest_position_is_bad_seq(input_format: str, native: bool) -> None:
    message = _feedha if input_format == "feedha-fix" else _fix44
    huge = [b"%d" % (MAX_SOURCE_SEQ + 1), b"%d" % (1 << 64), b"9" * 19, b"9" * 20, b"9" * 5000]
    frames = [message(1)] + [message(number) for number in huge] + [message(2)]
    counters, last = _play(_core(input_format, native), frames)
    assert last == 2 and counters["numbered"] == 2
    assert sum(counters["quarantined"].values()) == len(huge), counters


@pytest.mark.parametrize("native", [True, False])
def test_a_moldudp64_packet_numbered_at_the_end_of_the_u64_is_quarantined_message_by_message(
    native: bool,
) -> None:
    # A packet from MAX_SOURCE_SEQ - 2 (a jump its first three positions confirm) whose messages
    # run on past MAX_SOURCE_SEQ, then one numbered where the u64 ends.
    core = _core("itch50", native)
    frames = [
        _itch_packet(1, 3),
        _itch_packet(MAX_SOURCE_SEQ - 2, 5, start=4),
        _itch_packet((1 << 64) - 1, 2, start=9),
    ]
    counters, last = _play(core, frames)
    assert counters["quarantined"] == {"bad_seq": 4}, counters
    assert last == MAX_SOURCE_SEQ and counters["numbered"] == 6


def test_peek_and_find_refuse_positions_past_the_highest() -> None:
    assert peek_source_seq(b"35=X\x0134=%d\x01" % MAX_SOURCE_SEQ) == MAX_SOURCE_SEQ
    for raw in (b"%d" % (MAX_SOURCE_SEQ + 1), b"9" * 20, b"9" * 5000):
        with pytest.raises(ConversionError) as caught:
            peek_source_seq(b"35=X\x0134=" + raw + b"\x01")
        assert caught.value.reason == "bad_seq"
        assert fix.find_seq_num(b"8=FIX.4.4\x019=5\x0135=X\x0134=" + raw + b"\x01") is None
    assert fix.find_seq_num(b"8=FIX.4.4\x019=5\x0135=X\x0134=%d\x01" % MAX_SOURCE_SEQ) == MAX_SOURCE_SEQ


@pytest.mark.parametrize("count", [b"9" * 5000, b"0" * 5000 + b"1", b"%d" % (1 << 64)])
def test_an_entry_count_of_any_length_is_read_without_raising(count: bytes) -> None:
    message = _fix(
        b"35=X\x0149=SRC\x0134=5\x0152=20260105-14:30:00.000\x0155=AAA\x0160=20260105-14:30:00.000\x01"
        b"268=" + count + b"\x01279=0\x01269=0\x01270=1.5\x01271=10\x01"
    )
    bodies, bad = fix.split_messages(message)
    assert bad == 0
    engine = make_engine(ConverterTable.load(), prefer_native=False)
    if count.lstrip(b"0") == b"1":
        assert engine.parse(bodies[0]).source_seq == 5
    else:
        with pytest.raises(ConversionError) as caught:
            engine.parse(bodies[0])
        assert caught.value.reason == "entry_count_mismatch"


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("when", [b"99991231-23:59:59", b"22630101-00:00:00", b"00010101-00:00:00.5"])
def test_an_event_time_past_int64_nanoseconds_is_bad_event_time(native: bool, when: bytes) -> None:
    # Years past 2262 (or before 1677) hold no int64 of ns: once an internal fault (protobuf
    # refused the block's time), or on the C path a wrapped time.
    message = _fix(
        b"35=X\x0149=SRC\x0134=2\x0152=20260105-14:30:00.000\x0155=AAA\x0160=" + when
        + b"\x01268=1\x01279=0\x01269=0\x01270=1.5\x01271=10\x01"
    )  # fmt: skip
    counters, last = _play(_core("feedha-fix", native), [_feedha(1), message, _feedha(3)])
    assert counters["quarantined"] == {"bad_event_time": 1} and counters["numbered"] == 2 and last == 3
    with pytest.raises(fix.FixError):
        fix.parse_timestamp(when)
    assert fix.parse_timestamp(b"16780101-00:00:00") < 0 < fix.parse_timestamp(b"22000101-00:00:00")
