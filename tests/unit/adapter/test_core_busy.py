"""Busy turns (the ``busy`` fault injection): an adapter whose loop spends seconds in one turn.

A long turn is not a stop: the adapter has decided part of the turn and carries out the rest
seconds later, while the group goes on around it. ``group_harness`` carries out a
:class:`~adapter.core.actions.BurnCpu` as such a turn on its simulated clock. What must hold:
the actions come out where the fault says, nothing is lost or repeated, and no ``msg_seq``
ever names two messages -- the last test is the conflict a busy backup and a busy active
made together before a backup behind its active's report stopped releasing what it held.
"""

from __future__ import annotations

import sys
from functools import partial

import pytest

from feedha.adapter.core import BurnCpu, JournalRecords, Publish, SendSync
from feedha.adapter.core.busy import BusyDesk
from feedha.adapter.core.commands import Busy, Throttle
from feedha.adapter.core.sync_types import Role
from feedha.adapter.runner import burn_cpu

from .group_harness import SOURCE_TOPIC, CoreGroup


def _line_conflicts(group: CoreGroup) -> list[int]:
    # Every msg_seq some line carried for two different source messages.
    seen: dict[int, set[int]] = {}
    for number in group.members:
        for msg_seq, (source_seq, _payload) in group.line(number).items():
            seen.setdefault(msg_seq, set()).add(source_seq)
    return sorted(msg_seq for msg_seq, sources in seen.items() if len(sources) > 1)


def _assert_exact(group: CoreGroup) -> None:
    group.run(1.0, source=False)  # the tail arrives, holes fill from the journals
    assert _line_conflicts(group) == []
    assert group.client.stats().conflicts == 0
    assert (group.lost, group.duplicates) == (0, 0)
    assert group.delivered_source_seqs() == group.source.expected()


def test_the_desk_places_the_busy_stretch_where_the_fault_says_and_counts_its_turns() -> None:
    desk = BusyDesk()
    assert not desk.wants("convert") and not desk.blocks_pump
    assert desk.arm(where="report", ms=250, turns=2, hold_gil=False) == {
        "where": "report", "ms": 250, "turns": 2, "gil": False
    }  # fmt: skip
    assert desk.blocks_pump  # a conversion turn's stretch goes where the Python path puts it
    publish, journal = Publish(b"p"), JournalRecords(1, 1, 1, [1], [b"r"])
    sync = SendSync(object())  # type: ignore[arg-type]
    placed = desk.place([publish, journal, sync])
    assert placed == [publish, journal, BurnCpu(0.25, False), sync]  # out first, the report after
    assert desk.wants("report") and desk.status() == {
        "busy_armed": {"where": "report", "ms": 250, "turns": 1}, "busy_turns": 1
    }  # fmt: skip
    desk.place([sync])
    assert desk.plan is None and desk.status()["busy_turns"] == 2
    desk.arm(where="tick", ms=5, turns=1, hold_gil=True)
    assert not desk.blocks_pump and desk.place([sync]) == [BurnCpu(0.005, True), sync]
    with pytest.raises(ValueError, match="no busy turn is armed"):
        desk.place([])


def test_a_busy_conversion_turn_numbers_first_and_sends_nothing_before_the_stretch() -> None:
    group = CoreGroup(2, rate=2000)
    group.run_until(partial(group.in_sync, 2), within=3)
    active = group.members[1].core
    reply = group.command(1, Busy(700, 1, "convert", True))
    assert reply["ok"] and reply["where"] == "convert"
    assert active.pump_plan(group.now) is None  # armed: the Python path takes the turn
    before = active.sequencer.next_msg_seq
    actions = active.on_source([SOURCE_TOPIC, group.source.frame() or b""], now=group.now, wall_ns=1)
    assert active.sequencer.next_msg_seq > before  # numbered ...
    assert isinstance(actions[0], BurnCpu) and actions[0].seconds == pytest.approx(0.7)  # ... then busy
    assert active.status()["busy_turns"] == 1 and active.status()["busy_armed"] is None


@pytest.mark.parametrize("where", ["convert", "report", "tick"])
def test_a_busy_active_without_its_keepalive_is_replaced_and_nothing_is_lost(where: str) -> None:
    # Holding the interpreter for 1.5 s: no keepalive, no report, so the backups elect; the
    # old active carries out the rest of its turn, hears the higher term, and steps down.
    group = CoreGroup(3, rate=3000)
    group.run_until(lambda: group.in_sync(2) and group.in_sync(3), within=3)
    group.command(1, Busy(1500, 1, where, True))
    group.run(2.5)
    (active,) = group.actives()
    assert active != 1 and group.members[1].core.sync.role is Role.BACKUP
    assert group.members[1].core.status()["busy_turns"] == 1
    _assert_exact(group)


def test_a_long_timer_turn_under_the_keepalive_keeps_its_role() -> None:
    # A checkpoint's fold that lets the interpreter go: the keepalive repeats the report.
    group = CoreGroup(3, rate=3000)
    group.run_until(lambda: group.in_sync(2) and group.in_sync(3), within=3)
    group.command(1, Busy(2000, 1, "tick", False))
    group.run(3.0)
    assert group.actives() == [1] and group.members[1].roles() == ["active"]
    _assert_exact(group)


def test_a_backup_behind_its_active_s_report_releases_nothing_the_report_has_not_checked() -> None:
    # The backup is busy for 6 s. Meanwhile the active loses 60 frames of its source (a gap of
    # its own) and, finding no in-sync backup heard lately to ask, numbers on past them: its
    # line gives their msg_seqs to the messages after them. Then the active is busy for 1 s
    # just as the backup wakes. The backup, catching up behind the reports the active sent
    # while it was busy, hears nothing new for 50 ms; it used to release provisionally what
    # it held -- its numbering of the messages the active skipped, under msg_seqs the active's
    # line had given others (96 msg_seqs on two lines with two messages each, 188 conflicts at
    # the client). Those positions were on the active's line already; the report that checks
    # them comes first.
    group = CoreGroup(2, rate=3000)
    group.run_until(partial(group.in_sync, 2), within=3)
    group.run(0.2)
    group.command(2, Busy(6000, 1, "convert", True))
    group.run(5.9)
    group.members[1].lose_frames = 60
    group.run(0.1)
    group.command(1, Busy(1000, 1, "convert", True))
    group.run(2.0)
    group.run(1.0, source=False)
    assert _line_conflicts(group) == []
    assert group.client.stats().conflicts == 0
    assert group.duplicates == 0
    gate = group.members[2].core.emitter.gate.counters
    assert gate.provisional_releases == 0 and gate.discarded > 0  # the report found them wrong


def test_a_backup_behind_its_silent_active_s_report_stands_in_no_election_until_it_reached_it() -> None:
    # The same numbering past a gap of the active's own, but the backup runs behind (its
    # reading capped at 2,000 of the source's 3,000 msg/s) and the active's busy turn lasts
    # past the heartbeat timeout. The backup used to promote itself at once, behind the
    # active's last report, and number the messages the active had skipped under msg_seqs
    # the active's line had given others (123 msg_seqs, then faults at the report it reached
    # as the active, and it failed itself). It waits until it has checked that report; the
    # active comes back from its turn and stays the active.
    group = CoreGroup(2, rate=3000)
    group.run_until(partial(group.in_sync, 2), within=3)
    group.command(2, Throttle(2000.0))
    group.run(2.0)
    group.command(2, Busy(500, 1, "convert", True))  # silent: the active does not ask it
    group.run(0.4)
    group.members[1].lose_frames = 60
    group.run(0.1)
    group.command(1, Busy(1500, 1, "convert", True))
    group.run(3.0)
    assert group.actives() == [1] and group.members[2].core.sync.role is Role.BACKUP
    assert group.faults == []
    group.command(2, Throttle(0.0))
    group.run(2.0)
    group.run(1.0, source=False)
    assert _line_conflicts(group) == []
    assert group.client.stats().conflicts == 0
    assert (group.lost, group.duplicates) == (0, 0)


def test_a_backup_behind_a_dead_active_s_last_report_takes_over_once_it_reached_it() -> None:
    group = CoreGroup(2, rate=3000)
    group.run_until(partial(group.in_sync, 2), within=3)
    group.command(2, Throttle(2000.0))
    group.run(1.0)
    backup = group.members[2].core
    assert backup.sequencer.has_pending  # ~1,000 messages behind the active's reports
    group.kill(1)
    group.run_until(lambda: group.actives() == [2], within=5)
    assert not backup.sequencer.has_pending  # it reached the last report first
    group.command(2, Throttle(0.0))
    group.run(1.0)
    _assert_exact(group)


def test_the_runner_s_busy_stretch_gives_the_interpreter_back() -> None:
    before = sys.getswitchinterval()
    burn_cpu(0.01, hold_gil=True)  # the switch interval is raised for the stretch only
    assert sys.getswitchinterval() == before
    burn_cpu(0.01, hold_gil=False)
    assert sys.getswitchinterval() == before
