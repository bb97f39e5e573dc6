"""feedha-fix's state: VWAP/high/low arithmetic, digest properties, snapshot/restore, set_symbol."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.adapter.conversion import SourceMessage, SourceUpdateEntry, SymbolValues
from feedha.adapter.conversion.book import BookValues
from feedha.adapter.conversion.state import symbol_digest
from feedha.adapter.errors import ConversionError
from feedha.adapter.formats.feedha_fix.state import FeedhaFixState
from feedha.proto import market_pb2

BID, ASK, TRADE = market_pb2.ENTRY_TYPE_BID, market_pb2.ENTRY_TYPE_ASK, market_pb2.ENTRY_TYPE_TRADE
REPO = Path(__file__).parents[3]


def trade(price: float, size: int) -> SourceUpdateEntry:
    return SourceUpdateEntry(TRADE, price, size, price * size)


def message(symbol: str, *entries: SourceUpdateEntry, seq: int = 1) -> SourceMessage:
    return SourceMessage(seq, symbol, 0, entries)


def test_trades_update_volume_high_low_last_vwap() -> None:
    state = FeedhaFixState()
    values = state.apply(message("IBM", trade(100.0, 10)))
    assert (values.high, values.low, values.last, values.volume, values.trade_count) == (
        100.0,
        100.0,
        100.0,
        10,
        1,
    )
    assert values.vwap == 100.0
    values = state.apply(message("IBM", trade(102.0, 30), trade(99.0, 10)))
    assert (values.high, values.low, values.last) == (102.0, 99.0, 99.0)
    assert values.volume == 50 and values.trade_count == 3
    assert values.notional == 100.0 * 10 + 102.0 * 30 + 99.0 * 10
    assert values.vwap == values.notional / 50
    assert (values.bid, values.ask) == (0.0, 0.0)


def test_quotes_update_bid_ask_only() -> None:
    state = FeedhaFixState()
    values = state.apply(
        message("A", SourceUpdateEntry(BID, 9.5, 100, 0.0), SourceUpdateEntry(ASK, 9.75, 50, 0.0))
    )
    assert values == SymbolValues(bid=9.5, ask=9.75)
    values = state.apply(message("A", SourceUpdateEntry(BID, 9.6, 100, 0.0)))
    assert (values.bid, values.ask, values.trade_count, values.vwap) == (9.6, 9.75, 0, 0.0)


def test_zero_size_trade_keeps_vwap_defined() -> None:
    state = FeedhaFixState()
    values = state.apply(message("Z", trade(5.0, 0)))
    assert values.vwap == 0.0 and values.trade_count == 1 and values.high == 5.0


def test_apply_and_get_return_copies_and_preview_changes_nothing() -> None:
    state = FeedhaFixState()
    first = state.apply(message("A", trade(1.0, 1)))
    digest = state.digest
    previewed = state.preview(message("A", trade(2.0, 1)))
    assert previewed.volume == 2 and state.digest == digest and state.get("A") == first
    second = state.apply(message("A", trade(2.0, 1)))
    assert first.volume == 1 and second == previewed  # copies, not the live values
    copied = state.get("A")
    assert copied == second and copied is not second
    assert state.get("nope") is None
    assert "A" in state and len(state) == 1


def test_a_message_that_would_overflow_is_refused_and_leaves_the_state_alone() -> None:
    state = FeedhaFixState()
    state.apply(message("A", trade(1.0, 2**62)))
    digest = state.digest
    with pytest.raises(ConversionError, match="overflow"):
        state.apply(message("A", trade(1.0, 2**62)))
    with pytest.raises(ConversionError, match="overflow"):
        state.apply(message("B", trade(1e308, 1), trade(1e308, 1)))
    assert state.digest == digest and "B" not in state


def test_repr_shows_symbols_and_digest() -> None:
    state = FeedhaFixState()
    assert repr(state) == "<ConversionState [symbols=0, session=0, digest=0000000000000000]>"
    state.apply(message("A", trade(1.0, 1)))
    assert repr(state) == f"<ConversionState [symbols=1, session=0, digest={state.digest:016x}]>"
    assert state.digest != 0


def test_snapshot_restore_round_trip() -> None:
    state = FeedhaFixState()
    for i, symbol in enumerate(["A", "B", "C"]):
        state.apply(message(symbol, trade(10.0 + i, i + 1), SourceUpdateEntry(BID, 9.0, 1, 0.0)))
    snap = state.snapshot()
    snap["A"].volume = 999  # a deep copy: does not touch the state
    assert state.get("A") is not None and state.get("A").volume == 1  # type: ignore[union-attr]
    snap["A"].volume = 1
    other = FeedhaFixState()
    other.apply(message("X", trade(1.0, 1)))
    other.restore(snap)
    assert other.digest == state.digest and other.snapshot() == state.snapshot() and "X" not in other
    snap["B"].volume = 5  # restore copied too
    assert other.digest == state.digest


def test_set_symbol_adopts_values_and_keeps_digest_right() -> None:
    active, backup = FeedhaFixState(), FeedhaFixState()
    for state in (active, backup):
        state.apply(message("A", trade(1.0, 1)))
    active.apply(message("B", trade(2.0, 2)))
    backup.apply(message("B", trade(2.5, 2)))  # diverged
    assert backup.digest != active.digest
    assert backup.symbol_digest("A") == active.symbol_digest("A")
    assert backup.symbol_digest("B") != active.symbol_digest("B")
    adopted = active.get("B")
    assert adopted is not None
    backup.set_symbol("B", adopted)
    assert backup.digest == active.digest == backup.recompute_digest()
    adopted.volume = 77  # copied on adoption
    assert backup.digest == active.digest


def test_digest_is_deterministic_across_processes() -> None:
    script = (
        "from adapter.conversion import *\n"
        "from adapter.conversion.state import symbol_digest\n"
        "from adapter.formats.feedha_fix.state import FeedhaFixState\n"
        "s = FeedhaFixState()\n"
        "for i in range(50):\n"
        "    p = 10.0 + i / 8\n"
        "    entries = (SourceUpdateEntry(3, p, i, p * i), SourceUpdateEntry(1, 9.5, 1, 0.0))\n"
        "    s.apply(SourceMessage(i + 1, f'SYM{i % 7}', 0, entries))\n"
        "print(s.digest, symbol_digest('IBM', SymbolValues(volume=1)))\n"
    )
    outputs = set()
    for seed in ("1", "2", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run(
            [sys.executable, "-c", script],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        outputs.add(result.stdout)
    assert len(outputs) == 1
    exec_globals: dict[str, object] = {}
    exec(
        compile(script.replace("print(", "result = ("), "<digest>", "exec"), exec_globals
    )  # same in this process
    assert f"{exec_globals['result'][0]} {exec_globals['result'][1]}\n" == outputs.pop()  # type: ignore[index]


def test_symbol_digest_covers_every_value() -> None:
    base = symbol_digest("S", SymbolValues())
    for name in SymbolValues.__dataclass_fields__:
        changed = SymbolValues()
        if name == "book":  # fix44: the book and session values are covered too
            changed.book = BookValues()
        else:
            setattr(changed, name, 1 if isinstance(getattr(changed, name), int) else 1.5)
        assert symbol_digest("S", changed) != base, name
    assert symbol_digest("T", SymbolValues()) != base


_entries = st.lists(
    st.tuples(
        st.sampled_from([BID, ASK, TRADE]),
        st.floats(min_value=0.01, max_value=1e6, allow_nan=False),
        st.integers(min_value=0, max_value=10**6),
    ),
    min_size=0,
    max_size=4,
)
_messages = st.lists(st.tuples(st.sampled_from(["A", "B", "C", "DD", "E"]), _entries), max_size=40)


def _to_message(symbol: str, entries: list[tuple[int, float, int]]) -> SourceMessage:
    return message(symbol, *(SourceUpdateEntry(t, p, s, p * s if t == TRADE else 0.0) for t, p, s in entries))


@settings(max_examples=80, deadline=None)
@given(_messages)
def test_incremental_digest_equals_recomputed(
    messages: list[tuple[str, list[tuple[int, float, int]]]],
) -> None:
    state = FeedhaFixState()
    for symbol, entries in messages:
        state.apply(_to_message(symbol, entries))
        assert state.digest == state.recompute_digest()
    fresh = FeedhaFixState()
    fresh.restore(state.snapshot())
    assert fresh.digest == state.digest


@settings(max_examples=80, deadline=None)
@given(_messages, st.randoms(use_true_random=False))
def test_digest_is_independent_of_symbol_order(
    messages: list[tuple[str, list[tuple[int, float, int]]]], rnd: object
) -> None:
    # Per-symbol order is what matters; interleaving symbols differently must give the same digest.
    by_symbol: dict[str, list[SourceMessage]] = {}
    for symbol, entries in messages:
        by_symbol.setdefault(symbol, []).append(_to_message(symbol, entries))
    first = FeedhaFixState()
    for msgs in by_symbol.values():
        for msg in msgs:
            first.apply(msg)
    second = FeedhaFixState()
    symbols = list(by_symbol)
    rnd.shuffle(symbols)  # type: ignore[attr-defined]
    for symbol in reversed(symbols):
        for msg in by_symbol[symbol]:
            second.apply(msg)
    assert first.digest == second.digest
    assert first.snapshot() == second.snapshot()
