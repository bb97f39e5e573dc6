"""itch50 checkpoints written in C (``MboRun.checkpoint_symbols``) against the Python reference.

A journal checkpoint is ``recovery.encode_checkpoint_state`` of the state's snapshot: for the
itch50 state, every symbol's values with its live orders packed in its book
(``MboState.snapshot``), serialized by the protobuf runtime. Where ``_orders`` is built the
state writes the symbols itself (``MboState.checkpoint_symbols``); the blob must be the same
bytes, on states left by random streams (every message type, errors included), by a seeded day,
after a restore of odd values, with a session and purges, and on an empty state.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedha.adapter.conversion import choice
from feedha.adapter.conversion.book import BookValues, MboBookValues
from feedha.adapter.conversion.state import EncodedSymbols, SymbolValues
from feedha.adapter.core.purge import PurgeEntry
from feedha.adapter.core.recovery import decode_checkpoint_state, encode_checkpoint_state
from feedha.adapter.core.session import Session
from feedha.adapter.formats.itch50.day import make_itch_capture
from feedha.adapter.formats.itch50.engine import Itch50Engine
from feedha.adapter.formats.itch50.state import MboState
from feedha.proto import moldudp64
from tests.itch50_feed import convert, packets

from .test_itch50 import add_order, directory, executed
from .test_mbo_run import MESSAGE, OPENING

needs_native = pytest.mark.skipif(
    choice.make_order_store().run is None, reason="adapter.conversion._orders is not built"
)

SESSION = Session(3, after_source_seq=17, boundary_msg_seq=12, start_ns=1_700_000_000_000_000_000, reason=1)
PURGES = [
    PurgeEntry(
        purge_id=1,
        first_msg_seq=5,
        last_msg_seq=9,
        time_ns=1_700_000_000_000_000_001,
        reason="fat finger",
        issued_by="ops",
        term=2,
    )
]


def _same_blob(state: MboState, **extra: object) -> bytes:
    native = state.checkpoint_symbols()
    assert isinstance(native, EncodedSymbols)
    fields = {"source_stream": 7, "source_seq": 1234, "next_msg_seq": 999, **extra}
    reference = encode_checkpoint_state(state.snapshot(), **fields)  # type: ignore[arg-type]
    assert encode_checkpoint_state(native, **fields) == reference  # type: ignore[arg-type]
    return reference


@needs_native
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(MESSAGE, min_size=1, max_size=120), st.integers(1, 4), st.integers(2, 30))
def test_random_streams_checkpoint_the_same_bytes(messages: list[bytes], depth: int, max_orders: int) -> None:
    engine = Itch50Engine(depth=depth, max_orders=max_orders)
    for start in range(0, len(OPENING + messages), 10):
        convert(engine, moldudp64.encode_packet("T", start + 1, (OPENING + messages)[start : start + 10]))
    _same_blob(engine.mbo)
    _same_blob(engine.mbo, session=SESSION, purges=PURGES)


@needs_native
def test_a_day_checkpoints_the_same_bytes_and_restores_the_same_state() -> None:
    engine = Itch50Engine(depth=5)
    for packet in packets(make_itch_capture(symbols=80, orders=3_000, seed=3).data, per_packet=20):
        convert(engine, packet)
    assert len(engine.mbo.orders) > 500
    blob = _same_blob(engine.mbo, session=SESSION, purges=PURGES)
    restored = Itch50Engine(depth=5)
    restored.mbo.restore(decode_checkpoint_state(blob).symbols)
    assert restored.mbo.digest == engine.mbo.digest
    assert sorted(restored.mbo.orders.items()) == sorted(engine.mbo.orders.items())


@needs_native
def test_odd_values_and_symbols_without_orders_checkpoint_the_same_bytes() -> None:
    engine = Itch50Engine(depth=3)
    convert(
        engine, moldudp64.encode_packet("T", 1, [directory(b"AAA"), add_order(1, b"B", 100, b"AAA", 10_000)])
    )
    values = engine.mbo.snapshot()
    book = values["AAA"].book
    assert isinstance(book, MboBookValues)
    book.volume, book.level_indexed = 5, True  # an int where a float is kept, a level-indexed book
    values["NOBOOK"] = SymbolValues(volume=3, high=1.5, bid=-0.0)  # no book: the snapshot gives an empty one
    values["DEEP"] = SymbolValues(book=BookValues(bids=[(1.0, 2.0, 3)] * 12, asks=[(2.0, 1.0, 1)]))
    engine.mbo.restore(values)
    engine.mbo.set_symbol("LOOSE", SymbolValues(volume=1))  # never interned: no orders
    convert(engine, moldudp64.encode_packet("T", 3, [executed(1, 10)]))
    _same_blob(engine.mbo)


@needs_native
def test_an_empty_state_checkpoints_the_same_bytes() -> None:
    assert _same_blob(Itch50Engine(depth=2).mbo) == encode_checkpoint_state(
        {}, source_stream=7, source_seq=1234, next_msg_seq=999
    )


def test_the_python_store_checkpoints_its_snapshot() -> None:
    state = MboState(3, prefer_native=False)
    state.set_symbol("AAA", SymbolValues(volume=2))
    assert state.checkpoint_symbols() == state.snapshot()
