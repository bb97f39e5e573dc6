"""The delayed line and purges in a group of real cores on a simulated clock (no sockets).

Every adapter serves a delayed line from its own journal; a client arbitrates
the delayed lines. Purges go to the active, reach the backups, and survive a
failover and a restart on the journal: no delayed line ever sends a purged
message, the delayed lines agree, the delayed client misses nothing.
"""

from __future__ import annotations

import logging

import pytest

from feedha.adapter.core.commands import Purge
from feedha.proto import wire
from tests.unit.adapter.group_harness import CoreGroup

DELAY_S = 1.0


@pytest.fixture(autouse=True)
def _quiet(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL)


def purge_recent(group: CoreGroup, *, back: int = 30, count: int = 3, reason: str = "bad print") -> dict:
    (active,) = group.actives()
    last = group.members[active].core.emitter.journal.last_msg_seq  # type: ignore[union-attr]
    first = last - back
    return group.command(active, Purge(first=first, last=first + count - 1, reason=reason, command_id="c"))


def settle_replies(group: CoreGroup, want: int) -> list[dict]:
    group.run_until(lambda: len(group.replies) >= want, within=2.0)
    return group.replies


def check_delayed(group: CoreGroup, purged: set[int]) -> None:
    """Delayed lines agree, none sent a purged message, the client got every msg_seq once."""
    for msg_seq, copies in group.delayed_blocks().items():
        assert len(copies) == 1, (msg_seq, copies)  # every delayed line the same block
        ((stream, _source_seq),) = copies
        assert (stream == wire.TOMBSTONE_STREAM) == (msg_seq in purged), msg_seq
    assert group.delayed_duplicates == 0 and group.delayed_lost == 0
    assert set(group.purged) == purged
    assert set(group.delayed_delivered).isdisjoint(purged)
    realtime = {seq: (1, source_seq) for seq, source_seq in group.delivered.items()}
    for seq, identity in group.delayed_delivered.items():
        assert realtime.get(seq, identity) == identity  # the same message as in real time


def test_purges_reach_every_delayed_line_and_the_client_gets_tombstones() -> None:
    group = CoreGroup(3, rate=1000, delay_s=DELAY_S)
    group.run(1.5)
    accepted = purge_recent(group)
    assert accepted["ok"] and accepted["deferred"] and accepted["count"] == 3
    reply = settle_replies(group, 1)[0]
    assert reply["confirmed"] == [2, 3] and reply["unconfirmed"] == []
    late = purge_recent(group, back=1200, count=1)  # published 1.2 s ago: gone out delayed already
    assert late["ok"] is False and late["reason"] == "ALREADY_DELIVERED"
    group.run(2.0)
    group.run(DELAY_S + 0.5, source=False)
    purged = set(range(accepted["first_msg_seq"], accepted["last_msg_seq"] + 1))
    check_delayed(group, purged)
    for member in group.members.values():
        assert member.core.delayed.desk.book.known_through == 1
        assert member.core.status()["delayed"]["tombstones"] == 3
    assert len(group.delayed_delivered) + len(group.purged) == len(group.delivered)


def test_a_purge_survives_the_active_s_death() -> None:
    group = CoreGroup(3, rate=1000, delay_s=DELAY_S)
    group.run(1.5)
    accepted = purge_recent(group, back=10, count=5)
    settle_replies(group, 1)
    group.kill(1)  # before the purged messages are due on any delayed line
    group.run_until(lambda: bool(group.actives()), within=2.0)
    group.run(2.0)
    group.run(DELAY_S + 1.0, source=False)
    purged = set(range(accepted["first_msg_seq"], accepted["last_msg_seq"] + 1))
    check_delayed(group, purged)
    (new_active,) = group.actives()
    assert new_active != 1 and purged <= {s for s, _ in group.line(new_active, delayed=True).items()}


def test_a_restarted_adapter_finds_its_purges_in_its_journal_and_learns_the_ones_it_missed() -> None:
    group = CoreGroup(3, rate=1000, delay_s=DELAY_S)
    group.run(1.5)
    first = purge_recent(group, back=20, count=2)
    settle_replies(group, 1)
    group.kill(3)
    second = purge_recent(group, back=20, count=2)  # while adapter 3 is down
    settle_replies(group, 2)
    group.run(0.3)
    restarted = group.restart(3)
    assert restarted.core.delayed.desk.book.known_through == 1  # from its journal
    group.run(2.0)
    group.run(DELAY_S + 1.0, source=False)
    assert restarted.core.delayed.desk.book.known_through == 2  # from the active
    purged = set()
    for reply in (first, second):
        purged |= set(range(reply["first_msg_seq"], reply["last_msg_seq"] + 1))
    check_delayed(group, purged)  # adapter 3's delayed line included: no purged message on it
    carried = group.line(3, delayed=True)
    assert carried and max(carried) > max(purged)  # it went on serving after the restart
