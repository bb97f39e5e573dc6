"""The C fast path against the Python path it replaces: same bytes, same state, same numbering."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import zmq
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter import fastpath
from adapter.config import AdapterConfig
from adapter.conversion import Converter, ConverterTable
from adapter.converter_table import DerivedRule
from adapter.journal import JournalReader
from adapter.runner import AdapterRunner
from adapter.state import ConversionState, SymbolValues
from adapter.sync import Role
from proto import fix

pytestmark = pytest.mark.skipif(not fastpath.AVAILABLE, reason="adapter._fastpath is not built")

NOW_NS = 1_790_000_000_123_456_789


def test_the_extension_is_built_in_this_checkout() -> None:
    # Without it every adapter silently runs ~10x slower: CI must notice.
    assert fastpath.AVAILABLE


@given(st.binary(max_size=400))
def test_blake2b_64_is_hashlib_blake2b(data: bytes) -> None:
    from adapter import _fastpath

    assert _fastpath.blake2b_64(data) == int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


# --- source frames ------------------------------------------------------------------------

_PRICES = (
    "101.25",
    "0.5",
    "00.75",
    "-3.5",
    "1e2",
    "7",
    "7.",
    ".5",
    "123456789.123456789",
    "0",
    "-0.0",
    "1_0",
)
_TYPES = (fix.ENTRY_BID, fix.ENTRY_OFFER, fix.ENTRY_TRADE)


def _message(rng: random.Random, seq: int, symbols: list[str], odd: float) -> bytes:
    entries = [
        fix.SourceEntry(
            rng.choice(_TYPES),
            rng.choice(_PRICES) if rng.random() < odd else f"{rng.randint(1, 99999) / 100:.2f}",
            rng.choice((0, 1, 100, 2**40)) if rng.random() < 0.1 else rng.randint(1, 900),
        )
        for _ in range(rng.choice((0, 1, 1, 2, 3, 5)))
    ]
    return fix.encode_market_data(
        source_seq=seq,
        symbol=rng.choice(symbols),
        event_time_ns=1_790_000_000_000_000_000 + rng.randint(0, 10**12) * rng.choice((1, 1000, 1_000_000)),
        entries=entries,
    )


def _frames(seed: int, count: int, *, odd: bool = True) -> Iterator[bytes]:
    """Frames of 1-40 messages, with duplicates, gaps, garbage and corrupt checksums mixed in.

    ``odd``: also symbols and prices the C path leaves to Python (non-ASCII, spaces, exponents ...).
    """
    rng = random.Random(seed)
    symbols = ["AAPL", "MSFT", "X", "VOD.L"] + (["Ünï", "A B"] if odd else [])
    seq = 0
    sent: list[bytes] = []
    while count > 0:
        parts: list[bytes] = []
        for _ in range(min(count, rng.randint(1, 40))):
            count -= 1
            roll = rng.random()
            if roll < 0.03 and sent:
                parts.append(rng.choice(sent[-50:]))  # a duplicate
                continue
            if roll < 0.05:
                parts.append(b"8=FIX.4.4\x019=5\x0135=X\x0110=000\x01")  # bad checksum
                continue
            if roll < 0.06:
                parts.append(b"garbage")
                continue
            seq += rng.choice((1, 1, 1, 1, 1, 1, 1, 1, 1, 2)) if roll > 0.07 else 1
            message = _message(rng, seq, symbols, 0.2 if odd else 0.0)
            sent.append(message)
            parts.append(message)
        yield b"".join(parts)


# --- the two paths through a real runner ----------------------------------------------------------


class _FakeLine:
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self._more = False

    def send(self, frame: bytes, flags: int = 0) -> None:
        if not self._more:
            assert frame == b"EQ"  # the topic first
        else:
            self.sent.append(frame)
        self._more = bool(flags & zmq.SNDMORE)


def _runner(
    *, fast: bool, max_packet_bytes: int = 2048, publishing: bool = True, journal: Path | None = None
) -> AdapterRunner:
    config = AdapterConfig(
        journal_dir=journal,
        channel="EQ",
        channel_number=1,
        adapter=1,
        source_endpoint="tcp://127.0.0.1:1",
        source_stream="A-Z",
        source_stream_number=7,
        line_endpoint="tcp://127.0.0.1:2",
        sync_endpoint="tcp://127.0.0.1:3",
        max_packet_bytes=max_packet_bytes,
    )
    runner = AdapterRunner(config)
    if not fast:
        runner._fast = None
        runner.conversion = ConversionState()
    runner.sync = replace(runner.sync, deciding=False, role=Role.ACTIVE if publishing else Role.BACKUP)
    runner._line = _FakeLine()  # type: ignore[assignment]
    if runner.journal is not None:
        runner.journal.open()
    return runner


def _feed(runner: AdapterRunner, frames: list[bytes]) -> dict[str, Any]:
    for frame in frames:
        runner._on_source_payload(frame)
    runner._flush()
    line = runner._line
    assert isinstance(line, _FakeLine)
    return {
        "packets": [packet[:24] + packet[32:] for packet in line.sent],  # without the send time
        "counters": dict(runner.counters),
        "next_msg_seq": runner.sequencer.next_msg_seq,
        "last_source_seq": runner.sequencer.last_source_seq,
        "digest": runner.conversion.digest,
        "state": runner.conversion.snapshot(),
    }


@pytest.fixture
def fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    import adapter.runner

    monkeypatch.setattr(adapter.runner.time, "time_ns", lambda: NOW_NS)


@pytest.mark.usefixtures("fixed_clock")
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), count=st.integers(20, 400), packet=st.sampled_from((200, 700, 8192)))
def test_fast_and_python_paths_publish_the_same_packets(seed: int, count: int, packet: int) -> None:
    frames = list(_frames(seed, count))
    fast = _feed(_runner(fast=True, max_packet_bytes=packet), frames)
    slow = _feed(_runner(fast=False, max_packet_bytes=packet), frames)
    assert fast == slow
    assert fast["counters"]["published"] > 0


@pytest.mark.usefixtures("fixed_clock")
def test_both_paths_journal_the_same_records(tmp_path: Path) -> None:
    frames = list(_frames(17, 600))
    records = []
    for fast in (True, False):
        runner = _runner(fast=fast, journal=tmp_path / str(fast))
        _feed(runner, frames)
        assert runner.journal is not None
        runner.journal.close()
        records.append(list(JournalReader(tmp_path / str(fast)).read()))
    assert records[0] == records[1]
    assert len(records[0]) == _feed(_runner(fast=False), frames)["counters"]["published"] > 400


@pytest.mark.usefixtures("fixed_clock")
def test_ordinary_messages_take_the_fast_path() -> None:
    # Otherwise the equivalence above would hold trivially (everything in Python).
    runner = _runner(fast=True)
    on_body = runner._on_body
    slow: list[bytes] = []

    def counted(body: bytes) -> int:
        slow.append(body)
        return on_body(body)

    runner._on_body = counted  # type: ignore[method-assign]
    result = _feed(runner, list(_frames(3, 2000, odd=False)))
    assert result["counters"]["published"] > 1500
    assert len(slow) < 0.15 * result["counters"]["published"]  # duplicates, gaps and the message after each


@pytest.mark.usefixtures("fixed_clock")
def test_a_backup_that_does_not_publish_numbers_and_converts_the_same() -> None:
    frames = list(_frames(5, 500))
    fast_runner = _runner(fast=True, publishing=False)
    slow_runner = _runner(fast=False, publishing=False)
    fast, slow = _feed(fast_runner, frames), _feed(slow_runner, frames)
    assert fast == slow and fast["packets"] == []
    # The history the sync rules compare with is the same too.
    for source_seq in range(1, slow["last_source_seq"] + 1):
        assert fast_runner.sequencer._lookup(source_seq) == slow_runner.sequencer._lookup(source_seq)


@pytest.mark.usefixtures("fixed_clock")
def test_the_fast_path_stops_at_a_pending_report() -> None:
    from adapter.sequencer import PositionReport, ReportVerdict

    runner = _runner(fast=True, publishing=False)
    frames = list(_frames(11, 300))
    runner._on_source_payload(frames[0])
    target = runner.sequencer.last_source_seq + 5
    # The active gave that position a msg_seq 1000 ahead: rule 2 renumbers there.
    verdict, _ahead = runner.sequencer.compare(PositionReport(target, 5000, 0))
    assert verdict is ReportVerdict.BEHIND
    for frame in frames[1:]:
        runner._on_source_payload(frame)
    found = runner.sequencer._lookup(target)
    assert found is not None and found[0] == 5000


def test_an_unsupported_table_falls_back_to_python() -> None:
    table = ConverterTable.load()
    odd = replace(table, extra=(DerivedRule(target="odd", op="add", args=("bid", "ask", "trade_price")),))
    with pytest.raises(fastpath.Unsupported):
        fastpath.compile_spec(odd)
    assert fastpath.make_fast_path(odd, fastpath.new_conversion_state()) is None
    assert fastpath.make_fast_path(table, ConversionState()) is None  # the Python state: no fast path


# --- the state -----------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_native_state_keeps_the_same_values_and_digest(seed: int) -> None:
    converter = Converter(ConverterTable.load())
    native, python = fastpath.NativeConversionState(), ConversionState()
    for frame in _frames(seed, 200):
        for body in fix.split_messages(frame)[0]:
            try:
                msg = converter.parse(body)
            except Exception:
                continue
            assert native.apply(msg) == python.apply(msg)
            assert native.digest == python.digest
    assert native.snapshot() == python.snapshot()
    assert native.recompute_digest() == python.recompute_digest() == python.digest
    for symbol in python.snapshot():
        assert native.symbol_digest(symbol) == python.symbol_digest(symbol)
        assert symbol in native
    assert len(native) == len(python)
    adopted = SymbolValues(volume=5, high=2.0, low=1.0, last=1.5, vwap=1.4, trade_count=3, bid=1.0, ask=2.0)
    native.set_symbol("NEW", adopted)
    python.set_symbol("NEW", adopted)
    assert native.digest == python.digest and native.get("NEW") == adopted
    restored = fastpath.NativeConversionState()
    restored.restore(python.snapshot())
    assert restored.digest == python.digest and list(restored.snapshot()) == list(python.snapshot())
    assert native.get("NEVER") is None and native.symbol_digest("NEVER") is None


def test_native_state_rejects_bad_input_clearly() -> None:
    state = fastpath.NativeConversionState()
    with pytest.raises(TypeError):
        state.native.apply(b"AAPL", [])
    with pytest.raises(TypeError):
        state.native.apply("AAPL", [(3, "x", 1, 0.0)])
    with pytest.raises(OverflowError):
        state.native.apply("AAPL", [(3, 1.0, 2**62, 0.0), (3, 1.0, 2**62, 0.0)])
