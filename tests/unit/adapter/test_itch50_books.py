"""itch50: MoldUDP64 framing, market-by-order rules, snapshots and the digest, against a reference."""

from __future__ import annotations

import struct

import pytest

from feedha.adapter.conversion.book import ASK, BID
from feedha.adapter.conversion.codec import from_proto, to_proto
from feedha.adapter.conversion.order_table import ORDER_RECORD
from feedha.adapter.errors import ConfigError, ConversionError
from feedha.adapter.formats.itch50.day import make_itch_capture
from feedha.adapter.formats.itch50.engine import Itch50Engine
from feedha.adapter.formats.itch50.state import MAX_ORDERS, MboState
from feedha.adapter.formats.registry import engine_for_format
from feedha.proto import market_pb2, moldudp64
from feedha.proto.wire import MAX_SOURCE_SEQ
from tests.itch50_feed import convert, packets, shown
from tests.itch50_reference import ItchReference

from .test_conflate_config import BASE, _config
from .test_itch50 import (
    add_order,
    cancel,
    cross,
    delete,
    directory,
    executed,
    executed_with_price,
    replace,
    system_event,
    trade,
)


def _engine(*messages: bytes, depth: int = 10) -> tuple[Itch50Engine, dict[str, int]]:
    engine = Itch50Engine(depth=depth)
    reasons = convert(engine, moldudp64.encode_packet("T", 1, list(messages)))
    return engine, reasons


# ---- MoldUDP64 --------------------------------------------------------------------------------


def test_a_packets_messages_take_the_packets_sequence_plus_their_index() -> None:
    packet = moldudp64.encode_packet("NASDAQ01", 1000, [b"abc", b"", b"defg"])
    assert packet[:10] == b"NASDAQ01  " and int.from_bytes(packet[10:18], "big") == 1000
    assert int.from_bytes(packet[18:20], "big") == 3 and packet[20:22] == b"\x00\x03"
    decoded = moldudp64.decode_packet(packet)
    assert (decoded.session, decoded.sequence, decoded.message_count, decoded.messages) == (
        "NASDAQ01", 1000, 3, (b"abc", b"", b"defg"),
    )  # fmt: skip
    bodies, bad = moldudp64.split_records(moldudp64.records_of(decoded))
    assert bad == 0 and [moldudp64.record_seq(body) for body in bodies] == [1000, 1001, 1002]
    assert [body[8:] for body in bodies] == [b"abc", b"", b"defg"]


@pytest.mark.parametrize("size", [0, 1, 7, 8, 65_527, 65_528, 65_530, 65_534, 65_535])
def test_every_message_size_the_wire_allows_has_a_record_and_a_reason(size: int) -> None:
    # The record's length counts the 8-byte position too: at 65,528 bytes and up it passed a u16
    # (struct.error out of the conversion, once). Each size is one record, parsed to a reason.
    message = b"A" + bytes(max(size - 1, 0)) if size else b""
    packet = moldudp64.encode_packet("S", 41, [delete(1), message, delete(2)])
    engine = Itch50Engine()
    bodies, bad = moldudp64.split_records(engine.source_frame(packet))
    assert bad == 0 and [moldudp64.record_seq(body) for body in bodies] == [41, 42, 43]
    assert bodies[1][8:] == message
    with pytest.raises(ConversionError) as caught:
        engine.parse(bodies[1])
    assert caught.value.reason == "bad_length"


def test_heartbeats_and_the_end_of_session_carry_no_message() -> None:
    engine = Itch50Engine()
    assert engine.source_frame(moldudp64.encode_packet("S", 55, [])) == b""
    end = moldudp64.encode_packet("S", 55, [], count=moldudp64.END_OF_SESSION)
    assert engine.source_frame(end) == b""
    assert (engine.heartbeats, engine.ends_of_session) == (1, 1)


def test_a_truncated_packet_keeps_the_position_of_its_cut_message() -> None:
    packet = moldudp64.encode_packet("S", 7, [delete(1), add_order(2, b"B", 1, b"AAPL", 1)])[:-5]
    decoded = moldudp64.decode_packet(packet)
    assert decoded.truncated and len(decoded.messages) == 2
    engine = Itch50Engine()
    bodies, _bad = moldudp64.split_records(engine.source_frame(packet))
    assert [moldudp64.record_seq(body) for body in bodies] == [7, 8]
    with pytest.raises(ConversionError) as caught:
        engine.parse(bodies[1])
    assert caught.value.reason == "bad_length"  # quarantined at 8: no gap, nothing applied


def test_bytes_shorter_than_a_header_are_one_malformed_stretch() -> None:
    engine = Itch50Engine()
    frame = engine.source_frame(b"short")
    assert engine.next_message(frame, 0) == (None, len(frame))
    with pytest.raises(moldudp64.PacketError):
        moldudp64.decode_packet(b"x" * 19)


def test_binary_file_messages_are_length_prefixed() -> None:
    data = b"\x00\x03abc\x00\x00\x00\x02de\x00\x05xy"
    assert list(moldudp64.read_binary_file(data)) == [b"abc", b"", b"de", b"xy"]


# ---- the rules ---------------------------------------------------------------------------------


def test_executions_cancels_and_deletes_take_shares_off_and_remove_at_zero() -> None:
    engine, reasons = _engine(
        directory(b"AAPL"),
        add_order(1, b"B", 100, b"AAPL", 1_500_000),
        add_order(2, b"B", 50, b"AAPL", 1_500_000),
        add_order(3, b"S", 30, b"AAPL", 1_510_000),
        executed(1, 40),  # 60 left
        cancel(2, 50),  # removed at 0
        executed_with_price(3, 10, b"N", 1_520_000),  # not printable: shares off, no volume
        executed_with_price(1, 60, b"Y", 1_490_000),  # removed; printed at its own price
    )
    assert reasons == {}
    values = engine.state.get("AAPL")
    assert values is not None and values.book is not None
    assert values.book.bids == [] and values.book.asks == [(151.0, 20.0, 1)]
    assert (values.book.volume, values.book.last, values.book.high, values.book.low) == (
        100.0,
        149.0,
        150.0,
        149.0,
    )
    assert values.book.vwap == (40 * 150 + 60 * 149) / 100
    assert len(engine.state.orders) == 1


def test_a_replace_keeps_stock_and_side_and_trades_never_touch_books() -> None:
    engine, reasons = _engine(
        add_order(1, b"S", 100, b"MSFT", 3_000_000),
        replace(1, 9, 70, 3_010_000),
        trade(0, b"B", 500, b"MSFT", 2_990_000),
        cross(1000, b"MSFT", 3_000_000),
        delete(9),
        add_order(4, b"B", 10, b"MSFT", 2_900_000),
    )
    assert reasons == {}
    values = engine.state.get("MSFT")
    assert values is not None and values.book is not None
    assert values.book.asks == [] and values.book.bids == [(290.0, 10.0, 1)]
    assert (values.book.volume, values.book.last, values.book.low) == (1500.0, 300.0, 299.0)
    assert 9 not in engine.state.orders and 1 not in engine.state.orders


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (executed(77, 1), "unknown_order"),
        (add_order(1, b"B", 5, b"IBM", 1), "duplicate_order"),
        (replace(1, 2, 5, 1), "duplicate_order"),
        (cancel(1, 11), "bad_shares"),
    ],
)
def test_a_message_that_cannot_apply_changes_nothing(bad: bytes, reason: str) -> None:
    engine, _ = _engine(add_order(1, b"B", 10, b"IBM", 1_000_000), add_order(2, b"S", 10, b"IBM", 1_010_000))
    before = (engine.state.digest, engine.state.snapshot())
    _engine_reasons = convert(engine, moldudp64.encode_packet("T", 3, [bad]))
    assert _engine_reasons == {reason: 1}
    assert (engine.state.digest, engine.state.snapshot()) == before


def test_staging_changes_nothing_until_commit() -> None:
    engine, _ = _engine(add_order(1, b"B", 10, b"IBM", 1_000_000))
    state = engine.state
    digest = state.digest
    msg = engine.parse(moldudp64.split_records(engine.source_frame(
        moldudp64.encode_packet("T", 2, [executed(1, 10)])))[0][0])  # fmt: skip
    staged = state.stage(msg)
    assert state.digest == digest and 1 in state.orders
    assert staged["IBM"].book is not None and staged["IBM"].book.bids == []
    state.commit(staged)
    assert 1 not in state.orders and state.digest == state.recompute_digest() != digest


def test_the_shown_book_brings_the_next_level_into_view() -> None:
    adds = [add_order(i, b"B", 100, b"X", 1_000_000 - i * 100) for i in range(1, 5)]
    engine, _ = _engine(*adds, delete(1), depth=2)
    assert engine.state.levels("X", BID, 5) == [(999_800, 100, 1), (999_700, 100, 1), (999_600, 100, 1)]
    values = engine.state.get("X")
    assert values is not None and values.book is not None
    assert (
        values.book.bids == [(99.98, 100.0, 1), (99.97, 100.0, 1)] and engine.state.levels("X", ASK, 5) == []
    )


# ---- against the reference; snapshots and the digest --------------------------------------------


def test_a_generated_day_matches_the_independent_reference() -> None:
    capture = make_itch_capture(symbols=300, orders=4000, seed=11)
    engine = Itch50Engine(depth=10)
    reasons: dict[str, int] = {}
    for packet in packets(capture.data, per_packet=17):
        for reason, count in convert(engine, packet).items():
            reasons[reason] = reasons.get(reason, 0) + count
    assert set(reasons) == {"skipped"}  # S, H, B, I, N: counted and skipped, nothing quarantined
    reference = ItchReference(depth=10)
    reference.feed_file(capture.data)
    books, stats = shown(engine)
    assert books == reference.shown() and len(books) == 300
    assert stats == reference.shown_stats()
    assert len(engine.state.orders) == capture.live_orders > 100
    assert engine.state.digest == engine.state.recompute_digest()


def test_a_snapshot_through_the_wire_model_restores_the_same_orders_and_digest() -> None:
    capture = make_itch_capture(symbols=40, orders=800, seed=3)
    engine = Itch50Engine()
    for packet in packets(capture.data):
        convert(engine, packet)
    wire = {
        symbol: to_proto(values).SerializeToString() for symbol, values in engine.state.snapshot().items()
    }
    restored = MboState()
    restored.restore({symbol: from_proto(_state(data)) for symbol, data in wire.items()}, session=0)
    assert restored.digest == engine.state.digest == restored.recompute_digest()
    assert _orders(restored) == _orders(engine.state) and len(restored.orders) > 50
    rest = moldudp64.encode_packet("T", 1, [system_event(b"C")])
    assert convert(engine, rest) == {"skipped": 1}


def _state(data: bytes) -> market_pb2.SymbolState:
    state = market_pb2.SymbolState()
    state.ParseFromString(data)
    return state


def _orders(state: MboState) -> set[tuple[int, str, int, int, int]]:
    names = {symbol: state.snapshot()[symbol] for symbol in state.snapshot()}
    out = set()
    for symbol, values in names.items():
        book = values.book
        packed = getattr(book, "orders", b"")
        for ref, side, price, shares in ORDER_RECORD.iter_unpack(packed):
            out.add((ref, symbol, side, price, shares))
    return out


def test_a_hostile_sequence_number_never_breaks_the_frame() -> None:
    # Past MAX_SOURCE_SEQ (2**63 - 2) no position is that high: each such message keeps its
    # record (the number capped where the u64 ends) and is quarantined, bad_seq.
    engine = Itch50Engine()
    packet = moldudp64.encode_packet("S", (1 << 64) - 2, [delete(1), delete(2), delete(3)])
    bodies, bad = moldudp64.split_records(engine.source_frame(packet))
    assert (
        bad == 0 and [moldudp64.record_seq(body) for body in bodies] == [(1 << 64) - 2] + [(1 << 64) - 1] * 2
    )
    packet = moldudp64.encode_packet("S", MAX_SOURCE_SEQ, [delete(1), delete(2)])
    bodies, _bad = moldudp64.split_records(engine.source_frame(packet))
    assert [moldudp64.record_seq(body) for body in bodies] == [MAX_SOURCE_SEQ, MAX_SOURCE_SEQ + 1]
    with pytest.raises(ConversionError) as caught:
        engine.parse(bodies[1])
    assert caught.value.reason == "bad_seq"
    with pytest.raises(ConversionError) as caught:
        engine.peek_seq(bodies[1])
    assert caught.value.reason == "bad_seq"
    assert engine.peek_seq(bodies[0]) == MAX_SOURCE_SEQ


def test_a_flood_of_adds_and_of_new_symbols_stops_at_the_limits_and_changes_nothing() -> None:
    # A hostile (or broken) source could add orders forever, or rename one stock locate
    # forever: past the limits the message is quarantined and the state does not grow.
    engine = Itch50Engine(max_orders=3)
    engine.state.max_symbols = 2
    first = [add_order(ref, b"B", 10, b"AAPL", 1_000_000 + ref) for ref in range(1, 4)]
    assert convert(engine, moldudp64.encode_packet("T", 1, first)) == {}
    before = (engine.state.digest, engine.state.snapshot())
    flood = [add_order(ref, b"S", 5, b"AAPL", 2_000_000) for ref in range(10, 1010)]
    assert convert(engine, moldudp64.encode_packet("T", 4, flood)) == {"order_limit": 1000}
    assert (engine.state.digest, engine.state.snapshot()) == before and len(engine.state.orders) == 3
    # A replace at the limit keeps the count; a delete makes room for one add.
    made_room = [replace(1, 50, 7, 1_000_500), delete(2), add_order(60, b"S", 5, b"AAPL", 2_000_000)]
    assert convert(engine, moldudp64.encode_packet("T", 1004, made_room)) == {}
    assert sorted(engine.state.orders.items())[0][0] == 3 and len(engine.state.orders) == 3
    names = [directory(f"S{n:07d}".encode(), locate=1) for n in range(500)]
    assert convert(engine, moldudp64.encode_packet("T", 1007, names)) == {"symbol_limit": 499}
    assert sorted(engine.state.snapshot()) == ["AAPL", "S0000000"]
    # A snapshot past the limits (never the active's own) is held to them too.
    big = Itch50Engine(max_orders=100)
    convert(
        big, moldudp64.encode_packet("T", 1, [add_order(r, b"B", 1, b"IBM", 10_000) for r in range(1, 51)])
    )
    engine.state.restore(big.state.snapshot())
    assert len(engine.state.orders) == 3 and engine.state.digest == engine.state.recompute_digest()


def test_the_max_orders_flag_reaches_the_engine_and_a_bad_one_is_refused() -> None:
    config = _config([*BASE, "--format", "itch50", "--max-orders", "5000"])
    engine = engine_for_format(config.input_format, max_orders=config.max_orders)
    assert isinstance(engine, Itch50Engine) and engine.state.max_orders == 5000
    assert _config([*BASE, "--format", "itch50"]).max_orders == MAX_ORDERS
    with pytest.raises(ConfigError, match="max_orders must be at least 1, got 0"):
        _config([*BASE, "--format", "itch50", "--max-orders", "0"])


def test_a_block_carries_the_orders_its_message_touched_after_it() -> None:
    engine, _ = _engine(
        add_order(1, b"B", 100, b"MSFT", 3_000_000), add_order(2, b"S", 40, b"MSFT", 3_010_000)
    )

    def touched(message: bytes) -> list[tuple[int, int, int, int]]:
        body = moldudp64.split_records(engine.source_frame(moldudp64.encode_packet("T", 3, [message])))[0][0]
        msg = engine.parse(body)
        staged = engine.state.stage(msg)
        update = market_pb2.MarketUpdate.FromString(engine.encode_staged(msg, staged, 0))
        engine.state.commit(staged)
        (symbol,) = update.symbols
        packed = symbol.orders  # the documented layout, read with struct: >Q ref, B side, I price, I shares
        return [struct.unpack_from(">QBII", packed, at) for at in range(0, len(packed), 17)]

    assert touched(executed(1, 30)) == [(1, 1, 3_000_000, 70)]
    assert touched(replace(1, 9, 50, 2_990_000)) == [(1, 1, 3_000_000, 0), (9, 1, 2_990_000, 50)]
    assert touched(cancel(2, 40)) == [(2, 2, 3_010_000, 0)]
    assert touched(add_order(5, b"S", 7, b"MSFT", 3_020_000)) == [(5, 2, 3_020_000, 7)]
    assert touched(trade(0, b"B", 500, b"MSFT", 2_990_000)) == []
