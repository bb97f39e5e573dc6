"""The C fast path against the Python path it replaces: same bytes, same state, same numbering."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.conversion.state import SymbolValues
from feedha.adapter.core import AdapterCore, CoreConfig, JournalRecords, Publish
from feedha.adapter.core.sync import Role
from feedha.adapter.formats.feedha_fix import _fastpath_spec, _native, choice
from feedha.adapter.formats.feedha_fix.parser import Converter
from feedha.adapter.formats.feedha_fix.state import FeedhaFixState
from feedha.adapter.formats.feedha_fix.table import ConverterTable, DerivedRule
from feedha.proto import fix, wire

pytestmark = pytest.mark.skipif(
    not choice.IS_NATIVE_BUILT, reason="adapter.formats.feedha_fix._fastpath is not built"
)

NOW_NS = 1_790_000_000_123_456_789


def test_the_extension_is_built_in_this_checkout() -> None:
    # Without it every adapter silently runs ~10x slower: CI must notice.
    assert choice.IS_NATIVE_BUILT


@given(st.binary(max_size=400))
def test_blake2b_64_is_hashlib_blake2b(data: bytes) -> None:
    from feedha.adapter.formats.feedha_fix import _fastpath

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


# --- the two engines through a real core ------------------------------------------------------------


def _core(
    *, native: bool, max_packet_bytes: int = 2048, publishing: bool = True, journal: bool = False
) -> AdapterCore:
    config = CoreConfig(
        channel_number=1,
        adapter=1,
        source_stream_number=7,
        max_packet_bytes=max_packet_bytes,
        journal=journal,
    )
    engine = choice.make_engine(ConverterTable.load(), prefer_native=native)
    assert engine.is_native is native
    core = AdapterCore(config, engine, now=0.0)
    core.force_role(Role.ACTIVE if publishing else Role.BACKUP, now=0.0)
    return core


def _feed(core: AdapterCore, frames: list[bytes]) -> dict[str, Any]:
    actions = []
    for frame in frames:
        actions += core.on_source([b"A-Z", frame], now=1.0, wall_ns=NOW_NS)
    actions += core.on_tick(now=1.0, wall_ns=NOW_NS)
    packets = [a.packet for a in actions if isinstance(a, Publish) and wire.decode_header(a.packet).count]
    records = [
        (r.first_msg_seq + i, seq, payload)
        for r in actions
        if isinstance(r, JournalRecords)
        for i, (seq, payload) in enumerate(zip(r.source_seqs, r.payloads, strict=True))
    ]
    return {
        "packets": packets,
        "records": records,
        "counters": {**core.pipeline.counters.as_dict(), "published": core.emitter.published},
        "next_msg_seq": core.sequencer.next_msg_seq,
        "last_source_seq": core.sequencer.last_source_seq,
        "digest": core.state.digest,
        "state": core.state.snapshot(),
    }


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), count=st.integers(20, 400), packet=st.sampled_from((200, 700, 8192)))
def test_native_and_reference_engines_publish_the_same_packets(seed: int, count: int, packet: int) -> None:
    frames = list(_frames(seed, count))
    native = _feed(_core(native=True, max_packet_bytes=packet), frames)
    reference = _feed(_core(native=False, max_packet_bytes=packet), frames)
    assert native == reference
    assert native["counters"]["published"] > 0


def test_both_engines_journal_the_same_records() -> None:
    frames = list(_frames(17, 600))
    native = _feed(_core(native=True, journal=True), frames)
    reference = _feed(_core(native=False, journal=True), frames)
    assert native["records"] == reference["records"]
    assert len(native["records"]) == native["counters"]["published"] > 400


def test_ordinary_messages_take_the_native_run() -> None:
    # Otherwise the equivalence above would hold trivially (everything on the careful path).
    core = _core(native=True)
    careful = core.pipeline._careful
    slow: list[bytes] = []

    def counted(body: bytes, *args: Any) -> Any:
        slow.append(body)
        return careful(body, *args)

    core.pipeline._careful = counted  # type: ignore[method-assign]
    result = _feed(core, list(_frames(3, 2000, odd=False)))
    assert result["counters"]["published"] > 1500
    assert len(slow) < 0.15 * result["counters"]["published"]  # duplicates, gaps and the message after each


def test_a_backup_that_does_not_publish_numbers_and_converts_the_same() -> None:
    frames = list(_frames(5, 500))
    native_core = _core(native=True, publishing=False)
    reference_core = _core(native=False, publishing=False)
    native, reference = _feed(native_core, frames), _feed(reference_core, frames)
    assert native == reference and native["packets"] == []
    # The history the sync rules compare with is the same too.
    for source_seq in range(1, reference["last_source_seq"] + 1):
        assert native_core.sequencer._lookup(source_seq) == reference_core.sequencer._lookup(source_seq)


@pytest.mark.parametrize("native", [True, False])
def test_runs_stop_at_a_pending_report(native: bool) -> None:
    from feedha.adapter.core.sequencer import PositionReport, ReportVerdict

    core = _core(native=native, publishing=False)
    frames = list(_frames(11, 300))
    _feed(core, frames[:1])
    target = core.sequencer.last_source_seq + 5
    assert core.pipeline.stop_position() == 0
    # The active gave that position a msg_seq 1000 ahead: rule 2 renumbers there.
    verdict, _ahead = core.sequencer.compare(PositionReport(target, 5000, 0))
    assert verdict is ReportVerdict.BEHIND and core.pipeline.stop_position() == target
    _feed(core, frames[1:])
    found = core.sequencer._lookup(target)
    assert found is not None and found[0] == 5000


def _consecutive(seed: int, count: int) -> list[bytes]:
    """Frames of 1-40 well-formed messages at consecutive source positions from 1."""
    rng, frames, seq = random.Random(seed), [], 0
    while seq < count:
        size = min(count - seq, rng.randint(1, 40))
        messages = (_message(rng, seq + i, ["AAPL", "MSFT", "X"], 0.0) for i in range(1, size + 1))
        frames.append(b"".join(messages))
        seq += size
    return frames


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("agrees", [True, False], ids=["same-digest", "other-digest"])
def test_a_report_a_run_numbers_as_the_active_did_is_checked_right_after_it(
    native: bool, agrees: bool
) -> None:
    # The run converts the reported position and stops right after it for the check, where
    # the careful path used to take it: the line, the gate, the sync state and the checks the
    # core heard must be what the careful path gives, and no message may take that path.
    from feedha.adapter.core.sequencer import PositionReport, ReportVerdict, Sequencer
    from feedha.adapter.core.turn import Arrived

    frames = _consecutive(23, 600)
    leader = _core(native=native, publishing=False)
    _feed(leader, frames)

    def follow() -> tuple[dict[str, Any], list[tuple[int, Any]], list[bytes], int]:
        core = _core(native=native, publishing=False)
        _feed(core, frames[:2])
        target = core.sequencer.last_source_seq + 57
        found = leader.sequencer._lookup(target)
        assert found is not None
        msg_seq, digest = found
        report = PositionReport(target, msg_seq, digest if agrees else digest ^ 1)
        assert core.sequencer.compare(report)[0] is ReportVerdict.BEHIND
        sequencer = core.sequencer
        assert core.pipeline.stop_position() == target + (Sequencer.pending_stop is pending_stop)
        heard: list[tuple[int, Any]] = []
        on_interrupt = core.driver._on_interrupt

        def listen(interrupt: Any, turn: Any) -> Any:
            if type(interrupt) is Arrived:
                heard.append((interrupt.at, interrupt.check))
            return on_interrupt(interrupt, turn)

        core.driver._on_interrupt = listen  # type: ignore[method-assign]
        slow: list[bytes] = []
        take = core.pipeline._careful

        def counted(body: bytes, *args: Any) -> Any:
            slow.append(body)
            return take(body, *args)

        core.pipeline._careful = counted  # type: ignore[method-assign]
        result = _feed(core, frames[2:])
        gate = core.emitter.gate
        result["gate"] = (gate.confirmed, gate.is_trusted, gate.held, gate.counters.as_dict())
        result["sync"] = (core.sync.status, core.sync.mismatch_since is not None)
        assert not sequencer.has_pending
        return result, heard, slow, target

    pending_stop = Sequencer.pending_stop
    ran, ran_heard, ran_slow, target = follow()
    with pytest.MonkeyPatch.context() as patch:  # the careful path at the position, as before
        patch.setattr(Sequencer, "pending_stop", lambda self: min(self._pending) if self._pending else 0)
        careful, careful_heard, careful_slow, _ = follow()
    assert ran_slow == [] and len(careful_slow) == 1
    assert ran_heard == careful_heard
    checks = [(at, check.digest_matches, check.renumbered) for at, check in ran_heard]
    assert checks == [(target, agrees, False)]
    assert ran == careful
    assert ran["gate"][0] == (target if agrees else 0)


def test_an_unsupported_table_runs_on_the_reference_engine() -> None:
    table = ConverterTable.load()
    odd = replace(table, extra=(DerivedRule(target="odd", op="add", args=("bid", "ask", "trade_price")),))
    with pytest.raises(_fastpath_spec.Unsupported):
        _fastpath_spec.compile_spec(odd)
    assert "lacks" in str(choice.unsupported_reason(odd))
    assert not choice.make_engine(odd).is_native
    assert choice.make_engine(table).is_native
    assert not choice.make_engine(table, prefer_native=False).is_native


def test_more_extras_than_the_c_code_holds_run_on_the_reference_engine() -> None:
    # The C module refuses a spec of more than MAX_EXTRAS extras: the choice must not hand it one.
    table = ConverterTable.load()
    extras = tuple(
        DerivedRule(target=f"x{i}", op="add", args=("bid", "ask"))
        for i in range(_fastpath_spec.MAX_EXTRAS + 1)
    )
    many = replace(table, extra=extras)
    assert f"takes {_fastpath_spec.MAX_EXTRAS}" in str(choice.unsupported_reason(many))
    assert not choice.make_engine(many).is_native
    assert choice.make_engine(replace(many, extra=extras[:-1])).is_native


# --- the state -----------------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_native_state_keeps_the_same_values_and_digest(seed: int) -> None:
    converter = Converter(ConverterTable.load())
    native, python = _native.NativeConversionState(), FeedhaFixState()
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
    restored = _native.NativeConversionState()
    restored.restore(python.snapshot())
    assert restored.digest == python.digest and list(restored.snapshot()) == list(python.snapshot())
    assert native.get("NEVER") is None and native.symbol_digest("NEVER") is None


def test_native_state_rejects_bad_input_clearly() -> None:
    state = _native.NativeConversionState()
    with pytest.raises(TypeError):
        state.native.apply(b"AAPL", [])
    with pytest.raises(TypeError):
        state.native.apply("AAPL", [(3, "x", 1, 0.0)])
    with pytest.raises(OverflowError):
        state.native.apply("AAPL", [(3, 1.0, 2**62, 0.0), (3, 1.0, 2**62, 0.0)])


@pytest.mark.parametrize("seed", [3, 8])
def test_past_the_symbol_limit_both_engines_quarantine_a_new_symbol_alike(seed: int) -> None:
    # A source naming symbol after symbol must not grow the state forever: the C run stops
    # at a message naming one more, and the Python path quarantines it (symbol_limit).
    frames = list(_frames(seed, 600, odd=False))  # four symbols
    results = []
    for native in (True, False):
        core = _core(native=native)
        core.state.max_symbols = 3
        results.append(_feed(core, frames))
        assert len(core.state) == 3
    native_result, reference = results
    assert native_result == reference
    assert native_result["counters"]["quarantined"]["symbol_limit"] > 20
    assert native_result["counters"]["published"] > 300  # the three symbols held go on
