"""itch50 in the whole group (simulated clock): books by order across a kill, snapshot adoption, images.

The source plays a seeded ITCH 5.0 day as MoldUDP64 packets; every adapter
keeps the live orders and the books they add up to as conversion state.
"""

from __future__ import annotations

from typing import Any

from feedha.adapter.conversion.codec import from_proto
from feedha.adapter.core.commands import CorruptState
from feedha.adapter.core.sync_types import Role
from feedha.adapter.formats.itch50.state import MboState
from feedha.adapter.snapshot import ImageBuilder
from feedha.client import ImageAssembler
from tests.itch50_reference import ItchReference

from .group_harness import CoreGroup, ItchSource
from .test_itch50 import add_order, cancel, delete, executed


def _books(state: Any) -> dict[str, Any]:
    return {s: (v.book.bids, v.book.asks, v.book.volume, v.book.vwap) for s, v in state.snapshot().items()}


def test_books_survive_killing_the_active_and_match_a_reference() -> None:
    group = CoreGroup(3, rate=1500, itch50=True)
    group.run_until(lambda: group.in_sync(2) and group.in_sync(3), within=3)
    group.run(0.5)
    group.kill(1)
    group.run_until(lambda: len(group.actives()) == 1 and group.actives()[0] != 1, within=5)
    group.run(0.5)
    group.run(0.5, source=False)
    assert (group.lost, group.duplicates, group.out_of_order) == (0, 0, 0)
    assert group.client.stats().conflicts == 0
    assert group.delivered_source_seqs() == group.source.expected()
    survivors = [group.members[n].core.state for n in (2, 3)]
    assert survivors[0].digest == survivors[1].digest
    assert isinstance(survivors[0], MboState) and len(survivors[0].orders) > 100
    source = group.source
    assert isinstance(source, ItchSource)
    reference = ItchReference()
    for message in source.sent:
        reference.feed(message)
    shown = {s: {"bids": [[p, z] for p, z, _o in b.bids], "asks": [[p, z] for p, z, _o in b.asks]}
             for s, v in survivors[0].snapshot().items() for b in [v.book] if b is not None}  # fmt: skip
    assert shown == reference.shown() and len(shown) == 60


def test_poison_records_among_the_runs_are_quarantined_alike_and_cost_nothing_else() -> None:
    # The adapters' C runs stop at each poison record; the Python path quarantines it and the
    # run resumes after it: every other message is delivered once, across a kill of the active.
    group = CoreGroup(3, rate=1500, itch50=True)
    source = group.source
    assert isinstance(source, ItchSource)
    poisons = [
        executed(2**63, 10),  # an order never added
        add_order(2**62, b"X", 100, b"S0001", 10_000),  # a side that is neither B nor S
        delete(2**62)[:12],  # truncated
        cancel(1, 2**32 - 1),  # more shares than the order has (or an order no longer live)
        b"~" + bytes(18),  # a type the specification does not define
    ]
    at, every = 300, 200  # some before the kill, some after
    for index, poison in enumerate(poisons * 4):
        source.messages.insert(at + index * every, poison)
    poison_seqs = {at + index * every + 1 for index in range(len(poisons) * 4)}
    source.skipped |= poison_seqs
    group.run_until(lambda: group.in_sync(2) and group.in_sync(3), within=3)
    group.run(0.8)
    group.kill(1)
    assert min(poison_seqs) < source.next_seq < max(poison_seqs)  # the kill falls among them
    group.run_until(lambda: len(group.actives()) == 1 and group.actives()[0] != 1, within=5)
    group.run(2.5)
    group.run(0.5, source=False)
    assert source.next_seq > max(poison_seqs)  # every poison record was played
    assert (group.lost, group.duplicates, group.out_of_order) == (0, 0, 0)
    assert group.delivered_source_seqs() == source.expected()
    counts = [group.quarantined(n) for n in (2, 3)]
    assert counts[0] == counts[1] and sum(counts[0].values()) == len(poisons) * 4, counts
    survivors = [group.members[n].core.state for n in (2, 3)]
    assert survivors[0].digest == survivors[1].digest
    reference = ItchReference()
    for message in source.sent:
        if message not in poisons:
            reference.feed(message)
    shown = {s: {"bids": [[p, z] for p, z, _o in b.bids], "asks": [[p, z] for p, z, _o in b.asks]}
             for s, v in survivors[0].snapshot().items() for b in [v.book] if b is not None}  # fmt: skip
    assert shown == reference.shown()


def test_messages_at_every_boundary_of_the_length_field_cost_only_themselves() -> None:
    # A MoldUDP64 message block's length is a u16: 0, 1 and 65,534 / 65,535 bytes are all on the
    # wire, and so is a 65,530-byte "A" (which once overflowed the record frame's u16 length,
    # raised out of the conversion and failed the whole group). Each is quarantined where it is.
    group = CoreGroup(3, rate=1500, itch50=True)
    source = group.source
    assert isinstance(source, ItchSource)
    poisons = [b"", b"A", b"A" + bytes(65_529), b"D" + bytes(65_533), b"U" + bytes(65_534), bytes(65_535)]
    at, every = 300, 150
    for index, poison in enumerate(poisons):
        source.messages.insert(at + index * every, poison)
    poison_seqs = {at + index * every + 1 for index in range(len(poisons))}
    source.skipped |= poison_seqs
    group.run(2.0)
    group.run(0.5, source=False)
    assert source.next_seq > max(poison_seqs)
    assert (group.lost, group.duplicates, group.out_of_order) == (0, 0, 0)
    assert group.delivered_source_seqs() == source.expected()
    counts = [group.quarantined(n) for n in (1, 2, 3)]
    assert counts[0] == counts[1] == counts[2] == {"bad_length": 5, "unknown_type": 1}, counts
    assert all(group.members[n].status["internal_errors"] == 0 for n in (1, 2, 3))
    states = [group.members[n].core.state for n in (1, 2, 3)]
    assert states[0].digest == states[1].digest == states[2].digest


def test_a_backup_adopts_a_snapshot_with_the_order_table() -> None:
    group = CoreGroup(2, rate=1500, itch50=True)
    group.run_until(lambda: group.in_sync(2) and group.members[2].status["symbols"] >= 60, within=3)
    group.run(0.3)
    adopted = group.members[2].status["snapshots_adopted"]
    assert group.command(2, CorruptState(7))["ok"]
    group.run_until(lambda: group.members[2].status["snapshots_adopted"] > adopted, within=3)
    group.run(0.3)
    active, backup = group.members[1].core.state, group.members[2].core.state
    assert group.in_sync(2) and group.members[2].core.sync.role is Role.BACKUP
    assert isinstance(active, MboState) and isinstance(backup, MboState)
    assert backup.digest == active.digest and _books(backup) == _books(active)
    assert sorted(backup.orders.items()) != [] and len(backup.orders) == len(active.orders)


def test_a_late_joiner_gets_the_books_in_its_image() -> None:
    group = CoreGroup(1, rate=1500, itch50=True)
    group.run(1.0)
    member = group.members[1]
    builder = ImageBuilder(member.journal, lambda: None, channel=1, adapter=1)
    image = builder.newest(now=0.0)
    assert image is not None
    assembler = ImageAssembler(1)
    got = None
    for part in image.parts:
        got = assembler.add(part)
    assert got is not None
    state = member.core.state
    assert isinstance(state, MboState)
    images = {symbol: from_proto(value) for symbol, value in got.symbols.items()}
    assert got.msg_seq == member.status["next_msg_seq"] - 1
    assert {
        s: (v.book.bids, v.book.asks, v.book.volume, v.book.vwap) for s, v in images.items() if v.book
    } == _books(state)
    assert len(images) == 60 and any(v.book and v.book.bids for v in images.values())


def test_a_backup_restarted_from_its_journal_ends_with_the_actives_orders() -> None:
    # A block carries no order changes: the restarted backup folds its journal onto its newest
    # checkpoint (none here), so its order table lags and it quarantines executions of orders it
    # lost (unknown_order) until the digest check makes it adopt the active's snapshot.
    group = CoreGroup(2, rate=1500, itch50=True)
    group.run_until(lambda: group.in_sync(2), within=3)
    group.run(0.5)
    group.kill(2)
    group.run(0.3)
    group.restart(2)
    group.run_until(lambda: group.in_sync(2), within=5)
    group.run(0.5)
    active, backup = group.members[1].core.state, group.members[2].core.state
    assert isinstance(active, MboState) and isinstance(backup, MboState)
    assert backup.digest == active.digest == backup.recompute_digest()
    assert _books(backup) == _books(active) and len(backup.orders) == len(active.orders) > 100
    assert (group.lost, group.duplicates) == (0, 0)


def test_a_restart_rebuilds_the_order_table_from_the_checkpoint_and_the_blocks_after_it() -> None:
    # Each block carries the live orders its message touched (SymbolUpdate.orders): an
    # adapter alone, with no one to adopt a snapshot from, restarts with exactly its orders.
    group = CoreGroup(1, rate=1500, itch50=True)
    group.run(6.0)  # past the first checkpoint (every 5 s), then more blocks after it
    member = group.members[1]
    assert member.journal.checkpoint is not None
    state = member.core.state
    assert isinstance(state, MboState) and len(state.orders) > 100
    before = (sorted(state.orders.items()), state.digest, _books(state))
    group.kill(1)
    restarted = group.restart(1).core.state
    assert isinstance(restarted, MboState)
    assert (sorted(restarted.orders.items()), restarted.digest, _books(restarted)) == before
    assert restarted.digest == restarted.recompute_digest()
