"""Conflated lines with real processes: an active and a backup, raw sockets on every line, then a kill.

Each adapter serves a conflated line (``--conflate-line``, 0.1 s). The test
reads both conflated lines and both real-time lines with raw SUB sockets and
checks, independently of the adapters' code: the same conf_seq carries the
same block on both lines; each conflated state is the symbol's state on the
real-time line at the interval's boundary msg_seq, and the symbol did change
in that interval; after the active is killed, the backup's line goes on with
no conf_seq missing and no conflicting copy.
"""

from __future__ import annotations

import pytest

from feedha.adapter.conversion.codec import from_proto
from feedha.adapter.conversion.state import SymbolValues
from feedha.proto import market_pb2
from tests.integration.groups import LineTap, running_group

CHANNEL = "EQ-A-Z"

pytestmark = pytest.mark.timeout(120)

Seen = dict[int, tuple[int, bytes]]  # seq -> (source_seq, payload)


def _changes(real_time: Seen) -> dict[str, list[tuple[int, SymbolValues]]]:
    """symbol -> [(msg_seq, state)] in msg_seq order, from a real-time line."""
    out: dict[str, list[tuple[int, SymbolValues]]] = {}
    for msg_seq, (_source_seq, payload) in sorted(real_time.items()):
        update = market_pb2.MarketUpdate.FromString(payload)
        if update.symbol:
            out.setdefault(update.symbol, []).append((msg_seq, from_proto(update.state)))
    return out


def _check_states(conflated: Seen, real_time: Seen) -> int:
    """Every conflated block whose interval the real-time tap saw whole: its state is exact."""
    first_seen, changes = min(real_time), _changes(real_time)
    boundaries = sorted({boundary for boundary, _payload in conflated.values()})
    previous = {b: a for a, b in zip(boundaries, boundaries[1:], strict=False)}
    checked = 0
    for _conf_seq, (boundary, payload) in sorted(conflated.items()):
        before = previous.get(boundary)
        if before is None or before < first_seen or boundary > max(real_time):
            continue  # the tap did not see this interval whole
        update = market_pb2.MarketUpdate.FromString(payload)
        latest = [(seq, state) for seq, state in changes.get(update.symbol, []) if seq <= boundary]
        assert latest, f"{update.symbol}: conflated at {boundary}, not on the real-time line"
        last_seq, state = latest[-1]
        assert before < last_seq <= boundary, f"{update.symbol} did not change in ({before}, {boundary}]"
        assert from_proto(update.state) == state
        checked += 1
    return checked


@pytest.mark.slow  # 11 s: in CI's slow stage; the default keeps test_conflated_access's conflated lines
def test_conflated_lines_are_identical_exact_and_survive_a_kill() -> None:
    with running_group(
        channel=CHANNEL, channel_number=1, size=2, rate=2000, seconds=60, conflate_interval=0.1
    ) as group:
        group.start_adapter(1, active=True)
        group.start_adapter(2)
        group.start_source()
        group.wait_status(2, lambda s: s["status"] == "in_sync" and s["published"] > 500, 30)
        lines = {n: group.plan.adapter(n).line for n in (1, 2)}
        conflated = {10 + n: group.plan.adapter(n).conflated for n in (1, 2)}
        tap = LineTap({**lines, **conflated})
        try:
            tap.pump(3.0)
            group.adapters[1].kill()
            tap.pump(3.0)
        finally:
            tap.close()
        status = group.status(2)
    first, second = tap.seen[11], tap.seen[12]
    common = set(first) & set(second)
    assert len(common) > 100, f"{len(first)} and {len(second)} conflated blocks, {len(common)} in common"
    assert all(first[seq] == second[seq] for seq in common)  # same conf_seq, same block
    assert _check_states(second, tap.seen[2]) > 100
    assert _check_states(first, tap.seen[1]) > 50
    # The kill: the backup's line, from its first block on, has no hole and ran on after it.
    seqs = sorted(second)
    assert seqs == list(range(seqs[0], seqs[-1] + 1))
    assert seqs[-1] > max(first) + 100
    assert status["role"] == "active" and status["conflated"]["count_mismatches"] == 0
    assert status["conflated"]["skipped"] == 0
