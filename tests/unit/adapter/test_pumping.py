"""The source pump's core half (adapter/core/pumping.py): when it may run, and its booking.

The group harness runs the pump's Python twin where the runner would run the C
pump; with ``pump=False`` every frame goes through ``on_source``. The same seeded
source, poison included, must give the same lines, journals and states either
way, publish times aside: the pump takes a backlog in one go where the Python
loop takes a budget of frames a turn, so a message may go out a step earlier.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from feedha.adapter.core import syncbus
from feedha.adapter.core.actions import Publish
from feedha.adapter.core.commands import DropPackets, Throttle
from feedha.adapter.core.pump_reference import LineIdentity, pump_frames
from feedha.adapter.core.pumping import HeldKind, PumpMode, PumpPlan, PumpStop, admit_held
from feedha.adapter.core.source_side import BACKUP_READ_INTERVAL_S
from feedha.adapter.core.sync_types import Role
from feedha.plain_source.frames import POISON_KINDS, poison_message
from feedha.proto import market_pb2, wire

from .group_harness import SOURCE_TOPIC, CoreGroup

FORMATS = ("feedha-fix", "fix44", "itch50")


def _run(kind: str, *, pump: bool) -> CoreGroup:
    group = CoreGroup(2, rate=3000, pump=pump, fix44=kind == "fix44", itch50=kind == "itch50")
    group.run_until(lambda: group.in_sync(2), within=3)
    source = group.source
    if kind == "feedha-fix":
        for poison in POISON_KINDS:
            source.poison_message(lambda seq, poison=poison: poison_message(poison, source.message(seq), seq))
            group.run(0.02)
    group.run(0.5)
    group.run(0.3, source=False)
    return group


def _timeless(payload: bytes) -> bytes:
    update = market_pb2.MarketUpdate.FromString(payload)
    update.publish_time_ns = 0
    return update.SerializeToString(deterministic=True)


def _state(group: CoreGroup, number: int) -> dict[str, Any]:
    member = group.members[number]
    status = member.status
    return {
        "line": {seq: (source_seq, _timeless(p)) for seq, (source_seq, p) in group.line(number).items()},
        "journal": {seq: (r.source_seq, _timeless(r.payload)) for seq, r in member.journal.records.items()},
        "digest": status["digest"],
        "next_msg_seq": status["next_msg_seq"],
        "quarantined": status["quarantined"],
        "role": status["role"],
        # What the core booked: the last msg_seq its line carried, its counts, the frames it keeps.
        "published": (member.core.emitter.published_msg_seq, member.core.emitter.published),
        "numbered": member.core.pipeline.counters.numbered,
        "ring": repr(member.core.pipeline.ring),
    }


@pytest.mark.parametrize("kind", FORMATS)
def test_the_pump_books_what_the_python_loop_books(kind: str) -> None:
    pumped, python = _run(kind, pump=True), _run(kind, pump=False)
    assert pumped.pumped[PumpMode.SEND] > 1000 and pumped.pumped[PumpMode.HOLD] > 1000
    assert python.pumped == {}
    for number in (1, 2):
        assert _state(pumped, number) == _state(python, number)
    assert pumped.delivered == python.delivered and pumped.lost == 0 and pumped.duplicates == 0
    assert pumped.members[2].status["status"] == "in_sync"  # the active's reports still match the backup's
    if kind == "feedha-fix":
        assert sum(pumped.quarantined(1).values()) == len(POISON_KINDS)


def test_a_failover_in_the_middle_of_pumping_loses_and_repeats_nothing() -> None:
    group = CoreGroup(3, rate=5000)
    group.run_until(lambda: group.in_sync(2) and group.in_sync(3), within=3)
    group.run(0.2)
    before = group.pumped[PumpMode.SEND]
    group.kill(1)
    group.run_until(lambda: len(group.actives()) == 1 and group.actives()[0] != 1, within=3)
    group.run(0.3)
    assert group.pumped[PumpMode.SEND] > before  # the new active pumps too
    group.run(0.5, source=False)
    assert (group.lost, group.duplicates, group.out_of_order) == (0, 0, 0)
    assert group.delivered_source_seqs() == group.source.expected()


def test_the_plan_s_modes_and_what_keeps_the_pump_off() -> None:
    group = CoreGroup(2, rate=1000)
    group.run_until(lambda: group.in_sync(2), within=3)
    active, backup = group.members[1].core, group.members[2].core
    plan = active.pump_plan(group.now)
    assert plan is not None and plan.mode is PumpMode.SEND
    # A backup reads in batches until the report, for its gate: right after a drain it may have
    # no plan (it leaves the source alone for a batch interval); at the next batch it has one.
    later = group.now + BACKUP_READ_INTERVAL_S
    held = backup.pump_plan(later)
    assert held is not None and held.mode is PumpMode.HOLD
    assert (held.wait, held.batch) == (backup.next_deadline(later), BACKUP_READ_INTERVAL_S)
    assert (plan.wait, plan.batch) == (plan.deadline, 0.0)  # the active sends each frame as it comes
    assert plan.next_msg_seq == active.sequencer.next_msg_seq
    assert plan.expect_seq == active.sequencer.last_source_seq + 1
    assert (plan.term, plan.journal) == (active.sync.term, True)
    # The active's pump sends the heartbeat reports itself: its deadline is the core's other
    # timers, and the report it carries starts from where the sequencer stands.
    assert plan.deadline == active.next_deadline(group.now, heartbeat=False) > active.next_deadline(group.now)
    report, seq = plan.report, active.sequencer
    assert report is not None and report.due == active.sync.next_heartbeat_at
    assert report.every == active.config.sync.heartbeat_interval_s
    assert (report.next_source_seq, report.last_source_seq, report.last_msg_seq, report.digest) == (
        seq.next_source_seq,
        seq.last_recorded_source_seq,
        seq.last_msg_seq,
        seq.last_digest,
    )
    assert held.report is None  # a backup does not report
    # The report's fixed parts are those of the core's own report, serialized again only when
    # one of them moves (here the term).
    assert report.parts == syncbus.report_parts(
        active.driver.reporter.stream_state(active.driver.sender()), channel=active.config.channel_number
    )
    assert active.pump_report() is not None and active.pump_report().parts is report.parts  # type: ignore[union-attr]
    active.driver.sync = replace(active.sync, term=active.sync.term + 1)
    moved = active.pump_report()
    assert moved is not None and moved.parts != report.parts
    assert moved.parts == syncbus.report_parts(
        active.driver.reporter.stream_state(active.driver.sender()), channel=active.config.channel_number
    )
    active.driver.sync = replace(active.sync, term=active.sync.term - 1)
    assert group.command(1, Throttle(100.0))["ok"]
    assert active.pump_plan(group.now) is None  # an operator's throttle: the Python loop paces
    assert group.command(1, Throttle(0.0))["ok"]
    assert active.pump_plan(group.now) is not None
    assert group.command(1, DropPackets(every=2, count=3))["ok"]
    assert active.pump_plan(group.now) is None  # injected drops are the Python output's
    active.pipeline.waiting.fence = active.sequencer.last_source_seq + 5  # a session boundary is agreed
    assert active.pump_plan(group.now) is None
    active.pipeline.waiting.fence = None
    active.emitter.output.add(active.sequencer.next_msg_seq, 1, 1, b"x")  # a packet being filled
    assert active.pump_plan(group.now) is None
    assert active.sync.role is Role.ACTIVE


def test_the_twin_stops_where_the_c_pump_stops() -> None:
    group = CoreGroup(1, rate=1000, pump=False)
    group.run_until(lambda: group.actives() == [1], within=3)
    group.run(0.2)  # what queued while it started is converted
    core, source = group.members[1].core, group.source
    plan = core.pump_plan(group.now)
    assert plan is not None
    first = plan.expect_seq
    frames = [source.message(seq) for seq in range(first, first + 30)]
    identity = LineIdentity(1, 1, 1, 600)
    run = core.engine.run_function()

    def pump(messages: list[list[bytes]], **more: Any) -> Any:
        return pump_frames(plan, messages, run=run, frame_of=None, journal=None, line=identity,
                           wall_ns=1, now_ns=2, **more)  # fmt: skip

    pumped, packets = pump([[SOURCE_TOPIC, b"".join(frames[:10])], [SOURCE_TOPIC, b"".join(frames[10:20])]])
    assert pumped.stop == PumpStop.DEADLINE and pumped.messages == 20 and pumped.leftover is None
    assert len(packets) > 1 and all(len(p) <= 600 for p in packets)  # full packets went out on the way
    numbered = [(b.msg_seq, b.source_seq) for p in packets for b in wire.decode_packet(p)[1]]
    assert numbered == [(plan.next_msg_seq + i, first + i) for i in range(20)]
    # Out of sequence: converted up to it, the rest handed back from there.
    pumped, _packets = pump([[SOURCE_TOPIC, frames[20] + frames[25]]])
    assert pumped.stop == PumpStop.FRAME and pumped.leftover_converted == 0
    assert pumped.leftover_pos == 0 and pumped.messages == 0  # frames[20] does not follow: the plan's expect
    # Three parts: handed back as they came; a budget of one frame.
    assert pump([[b"a", b"b", b"c"]])[0].leftover == [b"a", b"b", b"c"]
    assert pump([[SOURCE_TOPIC, b""], [SOURCE_TOPIC, b""]], max_frames=1)[0].stop == PumpStop.BUDGET


def _backup_emitter() -> Any:
    from feedha.adapter.core.emitter import LineEmitter
    from feedha.adapter.core.journaling import JournalPlan
    from feedha.adapter.core.output import LineOutput

    output = LineOutput(channel=1, adapter=2, max_packet_bytes=8192, heartbeat_s=0.01)
    plan = JournalPlan(source_stream=1, checkpoint_every=10_000, checkpoint_interval_s=60.0, now=0.0)
    emitter = LineEmitter(output, plan, source_stream=1)
    emitter.close(confirmed=0, trusted=True)
    return emitter


def _held(first: int, count: int, *, packet: bytes) -> list[tuple[Any, ...]]:
    payloads = [b"m%d" % seq for seq in range(first, first + count)]
    last = first + count - 1
    return [
        (HeldKind.RECORDS, first, 1_000 + first, 100 + first, payloads),
        (HeldKind.PACKET, packet, last, count, 100 + last),
    ]


def _as_tuples(actions: list[Any]) -> list[tuple[Any, ...]]:
    return [
        (type(a).__name__, a.packet)
        if isinstance(a, Publish)
        else (type(a).__name__, a.first_msg_seq, a.time_ns, list(a.source_seqs), list(a.payloads))
        for a in actions
    ]


def test_a_packet_and_its_records_pass_the_gate_as_one_item_and_come_out_as_two_would() -> None:
    held = _held(1, 3, packet=b"P1") + _held(4, 2, packet=b"P2") + _held(6, 4, packet=b"P3")
    one_by_one, paired = _backup_emitter(), _backup_emitter()
    for item in held:
        getter = one_by_one.admit_records if item[0] == HeldKind.RECORDS else one_by_one.admit_packet
        assert getter(*item[1:]) == []  # a closed gate: everything waits
    assert admit_held(paired, held) == []
    assert (one_by_one.gate.held, paired.gate.held) == (6, 3)
    # Confirmed in two steps: up to the second packet's position, then the rest.
    for upto in (100 + 5, 100 + 9):
        separate, together = one_by_one.confirm(upto), paired.confirm(upto)
        assert _as_tuples(together) == _as_tuples(separate) and together
        assert [type(a).__name__ for a in together][-1] == "Publish"  # each packet after its records
    assert (paired.published_msg_seq, paired.published) == (one_by_one.published_msg_seq, 9)


def test_records_that_do_not_end_where_the_next_packet_ends_pass_the_gate_on_their_own() -> None:
    held = _held(1, 3, packet=b"P1")
    orphan = (HeldKind.RECORDS, 4, 9, 104, [b"m4"])
    emitter = _backup_emitter()
    assert admit_held(emitter, [*held, orphan, held[1]]) == []  # the orphan, then P1 again alone
    assert emitter.gate.held == 3
    with pytest.raises(ValueError, match="do not end"):
        emitter.admit_packet(b"P", 9, 1, 109, records=(4, 9, 104, [b"m4", b"m5"]))


def test_the_twin_s_held_records_take_their_latest_run_s_time() -> None:
    from feedha.adapter.core.pump_reference import _hold_records

    held: list[tuple[Any, ...]] = []
    _hold_records(held, 1, 1_000, 11, [b"a", b"b"])
    _hold_records(held, 3, 1_500, 13, [b"c"])  # the next frame, no packet in between: one item
    assert held == [(HeldKind.RECORDS, 1, 1_500, 11, [b"a", b"b", b"c"])]
    held.append((HeldKind.PACKET, b"P", 3, 3, 13))
    _hold_records(held, 4, 2_000, 14, [b"d"])  # after a packet: an item of its own
    assert held[-1] == (HeldKind.RECORDS, 4, 2_000, 14, [b"d"]) and len(held) == 3


def test_the_pump_s_journal_path_writes_and_books_what_journal_records_would() -> None:
    # The pump journals each packet itself (the journal plan's take() against the plan's
    # journaled_upto, then one append) and the core books the sums at settle (JournalPlan.took):
    # the same records written, the same bookkeeping, as JournalPlan.records would give.
    from feedha.adapter.core.journaling import JournalPlan
    from feedha.adapter.core.pump_reference import _Twin

    def plan() -> JournalPlan:
        return JournalPlan(source_stream=7, checkpoint_every=10_000, checkpoint_interval_s=60.0, now=0.0)

    by_records, by_pump = plan(), plan()
    for journal in (by_records, by_pump):
        journal.resume(last_msg_seq=12, last_source_seq=112)  # a restart: the journal has 1..12
    written: list[tuple[Any, ...]] = []
    pump_plan = PumpPlan(mode=PumpMode.SEND, deadline=1.0, wait=1.0, expect_seq=0, stop_seq=0, next_msg_seq=5,
                         term=1, journal=True, journaled_upto=by_pump.last_msg_seq)  # fmt: skip
    twin = _Twin(pump_plan, run=None, line=LineIdentity(1, 1, 7, 1400), wall_ns=0, now_ns=0,  # type: ignore[arg-type]
                 journal=lambda *args: written.append((*args[:3], list(args[3]), list(args[4]))))  # fmt: skip
    # Packets: all known, partly known, new, new after a hole in msg_seq (a failover's numbering).
    for first, source, count in ((5, 105, 3), (10, 110, 6), (16, 116, 4), (30, 130, 2)):
        payloads = [b"p%d" % (first + i) for i in range(count)]
        twin.to_journal = [first, 1_000 + first, source, payloads]
        assert twin.journal_packet() is None
        expected = by_records.records(first, 1_000 + first, range(source, source + count), payloads)
        got = written.pop() if written else None
        if expected is None:
            assert got is None
        else:
            assert got == (expected.first_msg_seq, expected.time_ns, expected.source_stream,
                           list(expected.source_seqs), list(expected.payloads))  # fmt: skip
        assert not written
    pumped = twin.result(PumpStop.DEADLINE, None)
    assert (pumped.journaled, pumped.journal_skipped, pumped.journal_last_msg_seq) == (9, 6, 31)
    by_pump.took(pumped.journaled, pumped.journal_skipped, pumped.journal_last_msg_seq,
                 pumped.journal_last_source_seq)  # fmt: skip
    assert repr(by_pump) == repr(by_records)
    assert (by_pump.journaled, by_pump.skipped, by_pump.last_source_seq) == (9, 6, 131)


def test_a_pumping_backup_checks_the_active_s_reports_inside_its_runs() -> None:
    # A report the backup's runs number as the active did is converted by the pump, which
    # stops right after it for the check: the careful path takes only what needs it.
    from feedha.adapter.core.turn import Arrived

    group = CoreGroup(2, rate=3000)
    core = group.members[2].core
    arrived: list[int] = []
    careful: list[int] = []
    on_interrupt, number = core.driver._on_interrupt, core.pipeline._number

    def listen(interrupt: Any, turn: Any) -> Any:
        if type(interrupt) is Arrived:
            arrived.append(interrupt.at)
        return on_interrupt(interrupt, turn)

    def numbered(msg: Any, *args: Any) -> Any:
        careful.append(msg.source_seq)
        return (yield from number(msg, *args))

    core.driver._on_interrupt = listen  # type: ignore[method-assign]
    core.pipeline._number = numbered  # type: ignore[method-assign]
    group.run_until(lambda: group.in_sync(2), within=3)
    group.run(0.5)
    group.run(0.3, source=False)
    assert group.pumped[PumpMode.HOLD] > 1000 and group.members[2].status["status"] == "in_sync"
    assert len(arrived) > 20 and len(set(arrived) & set(careful)) <= 1  # the first alignment, at most
    assert (group.lost, group.duplicates) == (0, 0)
    active, backup = (
        {seq: (source_seq, _timeless(p)) for seq, (source_seq, p) in group.line(n).items()} for n in (1, 2)
    )
    assert len(backup) > 1000 and backup == {seq: active[seq] for seq in backup}  # what it let out, right


@pytest.mark.parametrize("refusing", [1, 2], ids=["active", "backup"])
@pytest.mark.parametrize("pump", [True, False], ids=["pump", "python"])
def test_what_a_journal_refuses_is_numbered_kept_off_the_line_and_lost_to_nobody(
    pump: bool, refusing: int
) -> None:
    # A journal write that fails once (and not again: the worst case, nothing stops the
    # adapter). The engine has converted those messages: they keep their numbers and stay off
    # the adapter's line and out of its journal; the other line carries them. Once, the
    # active's pump dropped the run unbooked while the engine's state had moved past it (the
    # active would have given its numbers to the messages after it), and the Python path sent
    # what the journal had refused when the packet being filled was sealed.
    group = CoreGroup(2, rate=3000, pump=pump)
    group.run_until(lambda: group.in_sync(2), within=3)
    group.run(0.1)
    member = group.members[refusing]
    member.journal.refuse_from = member.core.sequencer.next_msg_seq + 50
    group.run(0.4)
    group.run(0.3, source=False)
    refused = member.journal.refused
    assert refused is not None and len(refused) >= 1
    assert group.faults == [(refusing, "the source pump" if pump else "the adapter loop")]
    assert member.core.pipeline.counters.internal_errors == 1
    assert [group.members[n].status["role"] for n in (1, 2)] == ["active", "backup"]
    lines = {
        n: {seq: (source_seq, _timeless(p)) for seq, (source_seq, p) in group.line(n).items()} for n in (1, 2)
    }
    other = lines[3 - refusing]
    assert not set(refused) & (set(lines[refusing]) | set(member.journal.records))
    assert set(refused) <= set(other)
    after = [seq for seq in lines[refusing] if seq > refused[-1]]
    assert len(after) > 500 and all(other[seq] == lines[refusing][seq] for seq in after)
    assert group.members[2].status["status"] == "in_sync"  # the active's reports still match
    assert (group.lost, group.duplicates, group.out_of_order) == (0, 0, 0)
    assert group.delivered_source_seqs() == group.source.expected()
