"""No role change loses what a backup held, and no poison causes one (the group harness, no journals).

Without journals nothing can fill a hole by retransmission: every normal
source message must reach the union of the lines, and the client's ``lost``
is a line hole. Each path into and out of the active role is driven with a
poison of every kind at the moment the role changes; the longest stretch with
no working active is bounded by the heartbeat timeout and one election.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest

from feedha.adapter.core.commands import RoleCommand
from feedha.adapter.core.sync_types import HEARTBEAT_TIMEOUT_S, PROMOTION_STAGGER_S, CommandKind
from feedha.plain_source.frames import POISON_KINDS, poison_message

from .group_harness import CoreGroup

# The heartbeat timeout, one election among three (a rank's stagger each), and a report round trip.
LEADERLESS_BOUND_S = HEARTBEAT_TIMEOUT_S + 3 * PROMOTION_STAGGER_S + 0.05


def _settled_group(size: int = 3, *, rate: float = 5000) -> CoreGroup:
    group = CoreGroup(size, rate=rate, journal=False)
    group.run_until(lambda: all(group.in_sync(n) for n in range(2, size + 1)), within=3)
    group.run(0.3)  # every backup's health report says so too
    return group


def _poison(group: CoreGroup, kind: str) -> int:
    source = group.source
    return source.poison_message(lambda seq: poison_message(kind, source.message(seq), seq))


def _every_poison(group: CoreGroup, *, every_s: float = 0.0) -> None:
    for kind in POISON_KINDS:
        _poison(group, kind)
        if every_s:
            group.run(every_s)


def _union_of_lines(group: CoreGroup) -> set[int]:
    seen: set[int] = set()
    for number in group.members:
        seen |= {source_seq for source_seq, _payload in group.line(number).values()}
    return seen


def _assert_nothing_lost(group: CoreGroup) -> None:
    group.run(0.6, source=False)  # the tail arrives, the client gives up on what never will
    expected = set(group.source.expected())
    assert not expected - _union_of_lines(group), "a normal message reached no line"
    assert group.lost == 0 and group.duplicates == 0
    assert group.client.stats().conflicts == 0
    assert group.client.stats().line_holes == 0
    assert group.delivered_source_seqs() == group.source.expected()


def _role_changes(group: CoreGroup) -> dict[int, list[str]]:
    return {number: member.roles() for number, member in group.members.items()}


def test_every_poison_in_place_of_a_message_costs_nothing_and_moves_no_role() -> None:
    group = _settled_group()
    before = _role_changes(group)
    _every_poison(group, every_s=0.4)
    _assert_nothing_lost(group)
    assert _role_changes(group) == before
    counts = [group.quarantined(n) for n in (1, 2, 3)]
    assert counts[0] == counts[1] == counts[2] and sum(counts[0].values()) == len(POISON_KINDS)
    assert {"source_seq_jump", "malformed_fix", "entry_count_mismatch", "bad_number"} <= set(counts[0])
    for member in group.members.values():
        status = member.status
        assert status["gaps"]["local"] == 0 and status["gaps"]["handed_over"] == 0
        assert status["source_gaps"] == 0  # every quarantined position was used up alike
        assert status["gate"]["discarded"] == 0


def test_a_message_nobody_can_read_is_a_gap_the_group_agrees_is_common() -> None:
    group = _settled_group()
    group.source.poison_message(lambda seq: b"no FIX at all, and no source_seq to read")
    group.run(0.5)
    _assert_nothing_lost(group)
    assert _role_changes(group) == {1: ["active"], 2: ["backup"], 3: ["backup"]}
    active = group.members[1].status["gaps"]
    assert active["asked"] == 1 and active["common"] == 1 and active["handed_over"] == 0
    for number in (2, 3):
        assert group.members[number].status["gaps"]["local"] == 0


def test_a_well_formed_copy_after_a_mangled_one_still_counts() -> None:
    group = _settled_group()
    source = group.source
    seq = source.next_seq
    good = source.message(seq)
    mangled = good[:-7] + b"10=%03d\x01" % ((int(good[-4:-1]) + 1) % 256)  # a wrong checksum
    source.poison.extend([mangled, good])
    source.next_seq += 1
    group.run(0.5)
    _assert_nothing_lost(group)
    assert seq in group.delivered.values()
    assert all(m.status["source_gaps"] == 0 for m in group.members.values())


# ---- every path into and out of the active role, with poison at the handover -------------


def _kill_active(group: CoreGroup) -> None:
    group.kill(1)


def _operator_failover(group: CoreGroup) -> None:
    # What feedctl failover sends: DEMOTE to the active, PROMOTE to the chosen backup.
    group.command(1, RoleCommand(CommandKind.DEMOTE, "drill"))
    group.command(2, RoleCommand(CommandKind.PROMOTE, "drill"))


def _active_misses_frames(group: CoreGroup) -> None:
    group.members[1].lose_frames = 2  # a real source gap of the active alone: it hands over


def _stall_active(group: CoreGroup) -> None:
    group.stall(1, 1.0)  # replaced meanwhile; it wakes, hears the higher term and steps down


def _active_fails(group: CoreGroup) -> None:
    group.command(1, RoleCommand(CommandKind.FAIL, "drill"))


PATHS: dict[str, Callable[[CoreGroup], None]] = {
    "promotion_after_silence": _kill_active,
    "operator_failover": _operator_failover,
    "handover_on_a_source_gap": _active_misses_frames,
    "demotion_by_a_higher_term": _stall_active,
    "self_failure": _active_fails,
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_role_change_with_poison_at_its_moment_loses_nothing(path: str) -> None:
    group = _settled_group()
    _every_poison(group)  # in the frame just before the role changes
    PATHS[path](group)
    _every_poison(group, every_s=0.02)  # and during the election
    group.run(1.5)
    _assert_nothing_lost(group)
    actives = group.actives()
    assert len(actives) == 1 and actives != [1]
    assert group.leaderless_s <= LEADERLESS_BOUND_S, f"no active for {group.leaderless_s:.3f}s"
    promoted = group.members[actives[0]]
    assert (
        promoted.core.unpublished_at_promotion == 0
    )  # it went on from the first msg_seq it had not published
    assert [e.fields["unpublished"] for e in promoted.events if e.fields.get("new") == "active"] == [0]


def test_a_handover_names_the_backup_that_has_the_messages() -> None:
    group = _settled_group()
    group.members[1].lose_frames = 1
    group.run_until(lambda: group.actives() != [1], within=1)
    group.run(0.5)
    assert group.actives() == [2]  # the lowest-numbered backup that answered it has them
    assert group.members[3].roles() == ["backup"]  # it waited for the successor, no election
    assert group.leaderless_s < 0.05
    assert group.members[1].status["gaps"] == {"asked": 1, "common": 0, "local": 1, "handed_over": 1}
    _assert_nothing_lost(group)


def test_a_backup_that_alone_missed_messages_repairs_itself_and_costs_nothing() -> None:
    group = _settled_group()
    group.members[3].lose_frames = 3
    group.run_until(lambda: group.members[3].status["gaps"]["local"] == 1, within=1)
    group.run_until(partial(group.in_sync, 3), within=3)
    assert group.members[3].status["snapshots_adopted"] >= 1
    group.kill(1)
    group.run(1.0)
    _assert_nothing_lost(group)
