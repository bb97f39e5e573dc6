"""The source pump's core half (adapter/core/pumping.py): when it may run, and its booking.

The group harness runs the pump's Python twin where the runner would run the C
pump; with ``pump=False`` every frame goes through ``on_source``. The same seeded
source, poison included, must give the same lines, journals and states either
way, publish times aside: the pump takes a backlog in one go where the Python
loop takes a budget of frames a turn, so a message may go out a step earlier.
"""

from __future__ import annotations

from typing import Any

import pytest

from feedha.adapter.core.commands import DropPackets, Throttle
from feedha.adapter.core.pumping import LineIdentity, PumpMode, PumpStop, pump_frames
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
    held = backup.pump_plan(group.now)  # a backup drains what is queued, for its gate
    assert held is not None and held.mode is PumpMode.HOLD and held.wait == group.now
    assert plan.next_msg_seq == active.sequencer.next_msg_seq
    assert plan.expect_seq == active.sequencer.last_source_seq + 1
    assert (plan.term, plan.journal) == (active.sync.term, True)
    assert plan.deadline == active.next_deadline(group.now)
    assert group.command(1, Throttle(100.0))["ok"]
    assert active.pump_plan(group.now) is None  # an operator's throttle: the Python loop paces
    assert group.command(1, Throttle(0.0))["ok"]
    assert active.pump_plan(group.now) is not None
    assert group.command(1, DropPackets(every=2, count=3))["ok"]
    assert active.pump_plan(group.now) is None  # injected drops are the Python output's
    active.pipeline.fence = active.sequencer.last_source_seq + 5  # a session boundary is agreed
    assert active.pump_plan(group.now) is None
    active.pipeline.fence = None
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
