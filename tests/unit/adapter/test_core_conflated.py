"""Conflated lines with real adapter cores on a simulated clock: identical lines, exact states, failover.

``CoreGroup`` (``group_harness.py``) runs the cores, the sync bus and the
source with no sockets; here every adapter serves a conflated line and the
tests read what each carried (docs/architecture.md, "Conflated lines").
"""

from __future__ import annotations

from feedha.adapter.conversion.codec import from_proto
from feedha.adapter.conversion.state import SymbolValues
from feedha.adapter.core.conflation import Boundary
from feedha.adapter.core.sync_types import Role
from feedha.adapter.core.syncbus import ConflateAck, Sender, StreamState, decode_sync, encode_sync
from feedha.proto import market_pb2, wire

from .group_harness import CHANNEL, CoreGroup

Blocks = dict[int, tuple[int, bytes, bool]]  # conf_seq -> (boundary msg_seq, payload, end of interval)


def _conflated(group: CoreGroup, number: int) -> Blocks:
    out: Blocks = {}
    for packet in group.members[number].conflated_packets:
        header, blocks = wire.decode_packet(packet)
        assert header.is_conflated
        for i, block in enumerate(blocks):
            assert block.source_stream == wire.CONFLATED_STREAM
            last = header.is_end_of_interval and i == len(blocks) - 1
            out[block.msg_seq] = (block.source_seq, block.payload, last)
    return out


def _states_at(group: CoreGroup, number: int) -> list[tuple[int, str, SymbolValues]]:
    """Every (msg_seq, symbol, state) the real-time line carried, in msg_seq order."""
    out = []
    for msg_seq, (_source_seq, payload) in sorted(group.line(number).items()):
        update = market_pb2.MarketUpdate.FromString(payload)
        if update.symbol:
            out.append((msg_seq, update.symbol, from_proto(update.state)))
        for part in update.symbols:
            out.append((msg_seq, part.symbol, from_proto(part.state)))
    return out


def _assert_states_match_real_time(group: CoreGroup, blocks: Blocks, real_time_from: int) -> int:
    """Each conflated state equals the symbol's real-time state at its boundary; returns how many checked."""
    changes = _states_at(group, real_time_from)
    checked = 0
    for _conf_seq, (boundary, payload, _last) in sorted(blocks.items()):
        update = market_pb2.MarketUpdate.FromString(payload)
        latest = [
            state for msg_seq, symbol, state in changes if symbol == update.symbol and msg_seq <= boundary
        ]
        assert latest, f"{update.symbol} conflated at {boundary} but never on the line before"
        assert from_proto(update.state) == latest[-1]
        checked += 1
    return checked


def _assert_identical(lines: list[Blocks]) -> None:
    seen: Blocks = {}
    for blocks in lines:
        for conf_seq, block in blocks.items():
            assert seen.setdefault(conf_seq, block) == block, f"conflict at conf_seq {conf_seq}"


def test_sync_bus_carries_conflation_proposals_and_acks() -> None:
    sender = Sender(1, 3, Role.ACTIVE, 5)
    proposed = (Boundary(4, 100, 7, 11), Boundary(5, 180, 8, 19))
    state = StreamState(sender, 1, 2, 3, 4, 5, 6, conflate_proposed=proposed, conflate_committed_k=3)
    decoded = decode_sync(encode_sync(state, channel=CHANNEL), channel=CHANNEL)
    assert isinstance(decoded, StreamState)
    assert decoded.conflate_proposed == proposed and decoded.conflate_committed_k == 3
    ack = ConflateAck(Sender(2, 3, Role.BACKUP, 5), 5)
    assert decode_sync(encode_sync(ack, channel=CHANNEL), channel=CHANNEL) == ack


def test_conflated_lines_are_identical_and_exact() -> None:
    group = CoreGroup(2, conflate_s=0.1)
    group.run(3.0)
    active, backup = _conflated(group, 1), _conflated(group, 2)
    assert len(active) > 50 and len(backup) > 50
    assert sorted(active) == list(range(1, len(active) + 1))  # conf_seq from 1, no hole
    assert set(backup) <= set(active) and len(backup) > len(active) // 2
    _assert_identical([active, backup])
    assert _assert_states_match_real_time(group, active, 1) == len(active)
    boundaries = sorted({boundary for boundary, _payload, _last in active.values()})
    assert len(boundaries) >= 20  # about one per 0.1 s
    ends = [conf_seq for conf_seq, (_b, _p, last) in active.items() if last]
    assert len(ends) == len(boundaries)  # each interval ends with the flag
    status = group.members[1].status["conflated"]
    assert status["intervals"] == len(boundaries) and status["count_mismatches"] == 0


def test_a_failover_costs_no_interval() -> None:
    group = CoreGroup(3, conflate_s=0.1)
    group.run(1.5)
    group.kill(1)
    group.run_until(lambda: bool(group.actives()) and group.actives() != [1], within=3)
    group.run(2.0)
    new = group.actives()[0]
    lines = [_conflated(group, n) for n in (1, 2, 3)]
    _assert_identical(lines)
    union: Blocks = {}
    for blocks in lines:
        union.update(blocks)
    assert sorted(union) == list(range(1, len(union) + 1))  # no interval missing across the kill
    after_kill = set(_conflated(group, new)) - set(lines[0])
    assert len(after_kill) > 20  # the new active carries on
    assert _assert_states_match_real_time(group, _conflated(group, new), new) > 0
    for number in (2, 3):
        assert group.members[number].status["conflated"]["count_mismatches"] == 0


def test_fix44_books_conflate_exactly() -> None:
    group = CoreGroup(2, conflate_s=0.2, fix44=True, rate=500)
    group.run(2.0)
    active, backup = _conflated(group, 1), _conflated(group, 2)
    assert active and backup
    _assert_identical([active, backup])
    assert _assert_states_match_real_time(group, active, 1) == len(active)
    some = market_pb2.MarketUpdate.FromString(next(iter(active.values()))[1])
    assert some.state.HasField("book")


def test_an_adapter_without_a_conflated_line_still_acknowledges() -> None:
    group = CoreGroup(2, conflate_s=0.1)
    group.members[2].core.conflated.enabled = False  # as a backup started without --conflate-line
    group.run(2.0)
    assert len(_conflated(group, 1)) > 20 and not group.members[2].conflated_packets
