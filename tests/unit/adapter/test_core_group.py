"""The whole failover story with real adapter cores in one process, on a simulated clock.

The same scenarios as ``tests/integration/test_adapter_group.py`` (which runs
them with real processes and sockets), plus the faults a process test cannot
time exactly: a stall, a kill at a chosen moment, a restart on the journal.
No sockets, no sleeps: ``CoreGroup`` (``group_harness.py``) steps the clock.
"""

from __future__ import annotations

from functools import partial

from feedha.adapter.core import Publish, SampleMachine
from feedha.adapter.core.commands import CorruptState, RoleCommand, Throttle
from feedha.adapter.core.health_side import MACHINE_SAMPLE_S, MEMORY_SAMPLE_S
from feedha.adapter.core.source_side import BACKUP_READ_INTERVAL_S
from feedha.adapter.core.sync_types import CommandKind, Role
from feedha.proto import fix, market_pb2, wire

from .group_harness import SOURCE_TOPIC, CoreGroup, Member


def _volumes(group: CoreGroup, number: int) -> dict[int, tuple[int, str, int, float, float]]:
    return {
        msg_seq: (source_seq, u.symbol, u.state.volume, u.state.high, u.state.low)
        for msg_seq, (source_seq, payload) in group.line(number).items()
        for u in [market_pb2.MarketUpdate.FromString(payload)]
    }


def _assert_every_message_delivered_once(group: CoreGroup) -> None:
    group.run(0.5, source=False)  # let the tail arrive and any hole fill
    assert (group.lost, group.duplicates, group.out_of_order) == (0, 0, 0)
    assert group.client.stats().conflicts == 0
    assert group.delivered_source_seqs() == group.source.expected()


def test_late_backup_catches_up_and_numbers_like_the_active() -> None:
    group = CoreGroup(1)
    group.run(1.5)
    late = group.start(2)
    group.run_until(lambda: group.in_sync(2) and late.status["published"] > 500, within=5)
    assert late.core.sync.role is Role.BACKUP and late.status["snapshots_adopted"] >= 1
    first, second = _volumes(group, 1), _volumes(group, 2)
    common = set(first) & set(second)
    assert len(common) > 500
    assert all(first[msg_seq] == second[msg_seq] for msg_seq in common)


def test_backup_ahead_throttles_until_the_active_leads() -> None:
    group = CoreGroup(2, rate=3000)
    group.run_until(partial(group.in_sync, 2), within=3)
    # Slow the active down (operator throttle): the backup runs ahead and must throttle itself.
    assert group.command(1, Throttle(500.0))["rate"] == 500.0
    group.run_until(lambda: group.members[2].core.sync.throttled, within=3)
    group.command(1, Throttle(0.0))
    group.run_until(lambda: not group.members[2].core.sync.throttled, within=5)
    group.run(0.5)
    assert group.in_sync(2) and group.members[2].core.sync.role is Role.BACKUP


def test_backup_with_wrong_conversion_state_adopts_the_actives() -> None:
    group = CoreGroup(2)
    group.run_until(lambda: group.in_sync(2) and group.members[2].status["symbols"] >= 5, within=3)
    adopted = group.members[2].status["snapshots_adopted"]
    reply = group.command(2, CorruptState(12345))
    assert reply["ok"] and reply["digest"] != group.members[1].core.state.digest
    group.run_until(lambda: group.members[2].status["snapshots_adopted"] > adopted, within=2)
    group.run(0.3)
    assert group.in_sync(2)
    assert group.members[2].core.state.digest == group.members[1].core.state.digest
    later = {s: v for s, v in _volumes(group, 1).items() if s > group.members[2].status["next_msg_seq"] - 200}
    second = _volumes(group, 2)
    assert later and all(second[s] == v for s, v in later.items() if s in second)


def _adopted_or_failed(member: Member, adopted: int) -> bool:
    return bool(member.status["snapshots_adopted"] > adopted or member.core.sync.role is Role.FAILED)


def test_repeated_desync_fails_the_least_healthy_backup_only() -> None:
    group = CoreGroup(3, penalties={3: 60.0})
    group.run_until(lambda: group.in_sync(2) and group.in_sync(3), within=3)
    for _round in range(4):
        for number in (2, 3):
            member = group.members[number]
            if member.core.sync.role is Role.BACKUP:
                adopted = member.status["snapshots_adopted"]
                group.command(number, CorruptState())
                group.run_until(
                    lambda m=member, a=adopted: (
                        m.status["snapshots_adopted"] > a or m.core.sync.role is Role.FAILED
                    ),
                    within=2,
                )
    assert group.members[3].core.sync.role is Role.FAILED
    assert group.members[2].core.sync.role is Role.BACKUP and group.in_sync(2)
    failed = [e for e in group.members[3].events if e.event == "role" and e.fields["new"] == "failed"]
    assert len(failed) == 1 and "lowest health" in failed[0].fields["reason"]


def test_restarted_old_active_sees_the_higher_term_and_serves_as_backup() -> None:
    group = CoreGroup(2)
    group.run_until(partial(group.in_sync, 2), within=3)
    group.kill(1)
    group.run_until(lambda: group.actives() == [2], within=2)
    assert group.members[2].core.sync.term == 2
    restarted = group.restart(1, term=1)
    group.run_until(partial(group.in_sync, 1), within=5)
    sync = restarted.core.sync
    assert (sync.role, sync.term, sync.active) == (Role.BACKUP, 2, 2)
    assert "active" not in restarted.roles()
    group.run(0.3)
    from feedha.proto import wire

    assert restarted.packets and {wire.decode_header(p).term for p in restarted.packets} == {2}


def test_malformed_source_frames_are_counted_and_cost_no_valid_message() -> None:
    group = CoreGroup(2, rate=2000)
    for _ in range(20):
        group.source.poison.extend([b"garbage", b"8=FIX.4.4\x019=5\x0135=X\x0110=000\x01"])
        group.run(0.1)
    for member in group.members.values():
        group._carry_out(member, member.core.on_source([b"A-Z"], now=group.now, wall_ns=0))  # one part only
    _assert_every_message_delivered_once(group)
    for number in (1, 2):
        status = group.members[number].status
        assert status["malformed_messages"] >= 20 and status["malformed_frames"] == 1


def test_killing_the_active_loses_and_repeats_nothing() -> None:
    group = CoreGroup(3, rate=3000)
    group.run_until(lambda: group.in_sync(2) and group.in_sync(3), within=3)
    group.run(1.0)
    group.kill(1)
    pause = group.run_until(lambda: len(group.actives()) == 1, within=2)
    assert pause < 0.4 + 0.2  # the heartbeat timeout and the rank stagger
    group.run(1.0)
    (promoted,) = group.actives()
    assert group.members[promoted].core.sync.term == 2
    _assert_every_message_delivered_once(group)


def test_a_stalled_active_is_replaced_and_steps_down_when_it_wakes() -> None:
    group = CoreGroup(3, rate=3000)
    group.run_until(lambda: group.in_sync(2) and group.in_sync(3), within=3)
    group.stall(1, 1.0)
    group.run(1.5)
    assert group.members[1].core.sync.role is Role.BACKUP  # heard the higher term on waking
    (active,) = group.actives()
    assert active != 1 and group.members[active].core.sync.term == 2
    group.run(0.5)
    _assert_every_message_delivered_once(group)


def test_a_backup_restarted_on_its_journal_resynchronizes_and_numbers_like_the_active() -> None:
    group = CoreGroup(2)
    group.run_until(partial(group.in_sync, 2), within=3)
    group.run(0.5)
    group.kill(2)
    group.run(0.5)
    restarted = group.restart(2)
    assert restarted.core.sequencer.next_msg_seq > 500  # recovered its numbering from the journal
    group.run_until(partial(group.in_sync, 2), within=5)
    group.run(0.5)
    first, second = _volumes(group, 1), _volumes(group, 2)
    tail = [s for s in second if s > restarted.core.sequencer.next_msg_seq - 300]
    assert tail and all(first[s] == second[s] for s in tail)
    _assert_every_message_delivered_once(group)


def test_operator_failover_by_hand_promotes_an_in_sync_backup() -> None:
    group = CoreGroup(2)
    group.run_until(partial(group.in_sync, 2), within=3)
    refused = group.command(1, RoleCommand(CommandKind.PROMOTE))
    assert refused["ok"]  # already active: nothing to do
    group.command(1, RoleCommand(CommandKind.DEMOTE, "drill"))
    group.run_until(lambda: group.actives() == [2], within=2)
    assert group.members[2].core.sync.term == 2
    _assert_every_message_delivered_once(group)


def _rewrite(message: bytes, tag: int, value: bytes) -> bytes:
    body, _end = fix.next_message(message, 0)
    assert body is not None
    return fix.encode_message([(t, value if t == tag else v) for t, v in fix.parse_fields(body)])


def test_poison_messages_are_quarantined_alike_and_cost_no_other_message() -> None:
    group = CoreGroup(3, rate=2000)
    group.run_until(lambda: group.in_sync(2) and group.in_sync(3), within=3)
    source = group.source
    poisons = {
        "oversize": lambda seq: source.message(seq, symbol="X" * 70_000),
        "bad_symbol": lambda seq: _rewrite(source.message(seq, symbol="QQQ"), 55, b"\xff\xfe"),  # not UTF-8
        "bad_number": lambda seq: _rewrite(source.message(seq), 271, b"1e999"),
    }
    for _round in range(3):
        for make in poisons.values():
            source.poison_message(make)
            group.run(0.05)
        # A volume that overflows int64: the first message fits, the second does not.
        source.poison_message(lambda seq: source.message(seq, symbol="BIG", size=2**62))
        source.skipped.discard(source.next_seq - 1)  # that one is a normal, deliverable message
        source.poison_message(lambda seq: source.message(seq, symbol="BIG", size=2**62))
        # A source_seq 10**12 ahead, then the stream goes on where it was.
        source.poison.append(source.message(source.next_seq + 10**12))
        group.run(0.2)
    _assert_every_message_delivered_once(group)
    counts = [group.quarantined(n) for n in (1, 2, 3)]
    assert counts[0] == counts[1] == counts[2]
    assert counts[0]["source_seq_jump"] == 3 and counts[0]["overflow"] == 3
    assert len(group.actives()) == 1
    assert all(member.alive and member.core.sync.role is not Role.FAILED for member in group.members.values())


def test_a_confirmed_jump_and_a_sequence_reset_move_every_adapter_alike() -> None:
    group = CoreGroup(2, rate=2000)
    group.run_until(partial(group.in_sync, 2), within=3)
    source = group.source
    source.skipped.update(range(source.next_seq, source.next_seq + 2_000_000))
    source.next_seq += 2_000_000  # the source really moved on (beyond the max gap)
    group.run(0.5)
    last = source.next_seq - 1
    reset_at = source.next_seq
    source.poison.append(fix.encode_sequence_reset(source_seq=reset_at, new_seq=reset_at + 5_000_000))
    source.skipped.update(range(reset_at, reset_at + 5_000_000))
    source.next_seq = reset_at + 5_000_000
    group.run(0.5)
    _assert_every_message_delivered_once(group)
    for number in (1, 2):
        status = group.members[number].status
        assert status["source_resets"] == 1 and status["source_gaps"] >= 1
        assert status["last_source_seq"] > last + 5_000_000
    assert group.quarantined(1) == group.quarantined(2) == {}


def test_a_backup_woken_from_a_stop_reads_the_group_before_it_elects() -> None:
    # SIGSTOP between reading the sync bus and firing its timers: on waking, the active's
    # reports of the last second wait unread, and its own clock says the active is silent.
    group = CoreGroup(2)
    group.run_until(partial(group.in_sync, 2), within=3)
    backup = group.members[2]
    group.stall(2, 1.0)
    group.run(1.0)
    assert backup.sync_inbox  # what the active said meanwhile
    group._carry_out(backup, backup.core.on_tick(now=group.now, wall_ns=group._wall_ns()))
    assert backup.core.sync.role is Role.BACKUP
    assert backup.core.next_deadline(group.now) == group.now  # its loop goes round at once
    group.run(0.5)  # and reads the sync bus first
    assert group.actives() == [1] and backup.roles() == ["backup"]


def test_a_backup_whose_packets_wait_at_the_gate_sleeps_until_something_happens() -> None:
    # The active's source link is cut (it hears nothing) while the backup's is not: the backup
    # converts ahead, its packets wait at the gate, and no heartbeat may announce its numbering
    # meanwhile. Its loop once took that overdue heartbeat for a deadline due now and went
    # round ~92,000 times a second, a whole core, until the group moved on.
    group = CoreGroup(2)
    group.members[1].lose_frames = 10**9
    group.run(1.0)
    group.run(0.5, source=False)  # the source goes quiet: no packet resets the line's heartbeat timer
    backup = group.members[2].core
    assert backup.sync.role is Role.BACKUP and backup.emitter.gate.held
    assert backup.sync.is_publishing and backup.emitter.output.heartbeat_due() < group.now
    assert not backup.emitter.may_heartbeat(backup.sequencer.last_recorded_source_seq)
    assert backup.next_deadline(group.now) > group.now  # it sleeps until a report or a timer


def _packets(actions: list[object]) -> list[bytes]:
    return [action.packet for action in actions if isinstance(action, Publish)]


def test_what_is_ready_goes_out_once_the_source_is_drained_before_any_timer() -> None:
    # A frame's messages fill the packet; the packet goes out when the runner found nothing
    # more to read (on_source_drained), not after the turn's timers (on_tick).
    group = CoreGroup(2)
    group.run_until(partial(group.in_sync, 2), within=3)
    active, now, wall_ns = group.members[1].core, group.now + 0.0001, group._wall_ns()
    frame = group.source.frame()
    while frame is None:  # the source model sends by its rate: take the next frame it makes
        group.source._due += 1
        frame = group.source.frame()
    assert _packets(active.on_source([SOURCE_TOPIC, frame], now=now, wall_ns=wall_ns)) == []
    packets = _packets(active.on_source_drained(now=now, wall_ns=wall_ns))
    assert len(packets) == 1
    header = wire.decode_header(packets[0])
    assert header.count == len(fix.split_messages(frame)[0])
    assert header.first_seq + header.count == active.sequencer.next_msg_seq
    assert _packets(active.on_tick(now=now, wall_ns=wall_ns)) == []  # nothing left for the tick


def test_a_backup_whose_output_waits_reads_the_source_in_batches_until_it_publishes_live() -> None:
    group = CoreGroup(2)
    group.run_until(partial(group.in_sync, 2), within=3)
    backup = group.members[2].core
    assert backup.sync.role is Role.BACKUP and not backup.emitter.gate.passes
    now = group.now + 0.0001
    backup.on_source_drained(now=now, wall_ns=group._wall_ns())
    assert not backup.reads_source(now) and not backup.reads_source(now + BACKUP_READ_INTERVAL_S / 2)
    assert backup.reads_source(now + BACKUP_READ_INTERVAL_S)
    assert now < backup.next_deadline(now) <= now + BACKUP_READ_INTERVAL_S  # the loop wakes to read
    active = group.members[1].core
    active.on_source_drained(now=now, wall_ns=group._wall_ns())
    assert active.reads_source(now)  # the active reads every frame as it comes
    # The active goes silent: the backup's gate lets its output through, and then it reads at once.
    group.stall(1, 10.0)
    group.run_until(lambda: backup.emitter.gate.passes, within=2)
    backup.on_source_drained(now=group.now, wall_ns=group._wall_ns())
    assert backup.reads_source(group.now)
    group.run_until(lambda: backup.sync.role is Role.ACTIVE, within=2)
    backup.on_source_drained(now=group.now, wall_ns=group._wall_ns())
    assert backup.reads_source(group.now)
    _assert_every_message_delivered_once(group)


def test_the_machine_is_sampled_often_and_its_memory_once_a_second() -> None:
    group = CoreGroup(1, rate=0)
    core, now = group.start(1).core, group.now
    asked: list[tuple[float, bool]] = []
    span, tick = 2 * MEMORY_SAMPLE_S, MACHINE_SAMPLE_S / 4
    for step in range(round(span / tick) + 1):
        t = now + step * tick
        asked += [(t, a.memory) for a in core.on_tick(now=t, wall_ns=0) if isinstance(a, SampleMachine)]
    assert len(asked) >= span / MACHINE_SAMPLE_S - 1  # CPU at every sample
    with_memory = [t for t, memory in asked if memory]
    assert 2 <= len(with_memory) <= 3 and asked[0][1]  # memory at the first, then once a second
    assert all(b - a >= MEMORY_SAMPLE_S for a, b in zip(with_memory, with_memory[1:], strict=False))


def test_a_silent_active_s_deadline_releases_the_backup_s_gate_on_time() -> None:
    # A backup's pump holds its batches until the next report or the core's deadline, so the
    # release the active's silence calls for must be a deadline, not something a tick finds.
    group = CoreGroup(2, rate=1000)
    group.run_until(lambda: group.in_sync(2), within=3)
    group.kill(1)
    backup = group.members[2].core
    sync, gate = backup.sync, backup.emitter.gate
    heard = max(sync.reported_at or 0.0, sync.active_heard_at or 0.0, sync.demoted_at or 0.0)
    assert heard and not gate.passes and gate.is_trusted
    release_at = heard + backup.config.silence_release_s
    t = group.now
    while not gate.is_provisional and backup.sync.role is Role.BACKUP and t < heard + 1.0:
        t = backup.next_deadline(t)  # woken only at its deadlines, as the pump's caller is
        backup.on_tick(now=t, wall_ns=0)
    assert gate.is_provisional and release_at <= t <= release_at + 1e-6, (t - heard, gate)
