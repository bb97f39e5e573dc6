"""Purges survive a restart and a failover: real processes, every delayed line tapped.

One adapter group (three adapters, journals, delayed lines 2 s behind) under
a plain source. Purges go to the active's control socket (as ``feedctl``'s
reach it) while a backup is down, before it restarts on its journal, and
right before the active is killed. A client arbitrates the delayed lines
(filling holes with delayed ranges) and a tap records what every delayed line
carried: no line ever sends a purged message, the client gets a ``Purged``
event for each and loses nothing.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import zmq

from feedha.adapter.journal.reader import JournalReader
from feedha.client import ChannelSpec, Delivery, Purged, ReplayClient, Subscriber, SubscriberConfig
from feedha.cluster import control
from feedha.proto import wire
from tests.integration.groups import Group, running_group

DELAY_S = 2.0
EXTRA = ["--delay", f"{DELAY_S:g}", "--purge-margin", "0.5"]

pytestmark = pytest.mark.timeout(180)


class DelayedWatch(threading.Thread):
    """A delayed client and a raw tap on every delayed line, on a thread of their own."""

    def __init__(self, group: Group) -> None:
        super().__init__(name="delayed-watch", daemon=True)
        plan = group.plan
        self.lines = {a.adapter: a.delayed for a in plan.adapters}
        self.replay = ReplayClient({plan.channel_number: list(plan.replays)})
        spec = ChannelSpec(plan.channel, plan.channel_number, tuple(self.lines.values()), delayed=True)
        self.subscriber = Subscriber(
            [spec], SubscriberConfig(loss_timeout=3.0), on_retransmission_needed=self.replay
        )
        self.carried: dict[int, dict[int, int]] = {n: {} for n in self.lines}  # adapter -> msg_seq -> stream
        self.delivered: dict[int, int] = {}  # msg_seq -> source_seq
        self.purged: dict[int, int] = {}  # msg_seq -> purge_id
        self.duplicates = 0
        self.stop = threading.Event()

    def run(self) -> None:
        ctx = zmq.Context.instance()
        taps = {}
        for number, endpoint in self.lines.items():
            sock = ctx.socket(zmq.SUB)
            sock.linger, sock.rcvhwm = 0, 0
            sock.subscribe(b"")
            sock.connect(endpoint)
            taps[sock] = number
        try:
            while not self.stop.is_set():
                for event in self.subscriber.poll(0.02):
                    if isinstance(event, Delivery | Purged) and (
                        event.msg_seq in self.delivered or event.msg_seq in self.purged
                    ):
                        self.duplicates += 1
                    elif isinstance(event, Delivery):
                        self.delivered[event.msg_seq] = event.source_seq
                    elif isinstance(event, Purged):
                        self.purged[event.msg_seq] = event.purge_id
                for sock, number in taps.items():
                    while sock.poll(0):
                        _topic, packet = sock.recv_multipart()
                        header, blocks = wire.decode_packet(packet)
                        assert header.is_delayed
                        for block in blocks:
                            self.carried[number][block.msg_seq] = block.source_stream
        finally:
            for sock in taps:
                sock.close(linger=0)
            self.subscriber.close()
            self.replay.close()


def purge(group: Group, *, back: int = 100) -> dict[str, Any]:
    """Purge one message the active published ``back`` messages ago, through its control socket."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for plan in group.plan.adapters:
            proc = group.adapters.get(plan.adapter)
            if proc is None or not proc.alive:
                continue
            status = control(plan.control, "status")
            if status["role"] != "active":
                continue
            first = int(status["journal_last_msg_seq"]) - back
            reply = control(plan.control, "purge", first=first, reason="bad print", timeout=5.0)
            assert reply["ok"], reply
            return {**reply, "adapter": plan.adapter}
        time.sleep(0.05)  # poll interval of a deadline-bounded wait (between actives)
    raise AssertionError("no active adapter took the purge")


def promoted(group: Group, *, instead_of: int) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for number, proc in group.adapters.items():
            if number != instead_of and proc.alive and group.status(number)["role"] == "active":
                return number
        time.sleep(0.05)  # poll interval of a deadline-bounded wait
    raise AssertionError("no backup took over")


@pytest.mark.slow  # over 10 s: with the drills, so the default suite stays under 10 minutes
def test_purges_survive_a_restart_on_the_journal_and_a_failover(tmp_path: Path) -> None:
    with running_group(
        channel="EQ-PF", channel_number=1, size=3, rate=1000, seconds=8, journal_root=tmp_path, delayed=True
    ) as group:
        for number in (1, 2, 3):
            group.start_adapter(number, active=number == 1, extra=EXTRA)
        watch = DelayedWatch(group)
        watch.start()
        group.start_source()
        group.wait_status(1, lambda s: int(s["journal_last_msg_seq"] or 0) > 500, timeout=20)
        first = purge(group)
        others = sorted({1, 2, 3} - {first["adapter"]})
        assert first["confirmed"] == others  # both backups hold it before the operator hears back
        down = others[-1]
        group.adapters[down].kill()  # a backup goes down: it misses the next purge
        second = purge(group)
        assert second["purge_id"] == 2 and down not in second["confirmed"]
        group.start_adapter(down, extra=EXTRA)  # back on its journal: it holds purge 1, learns purge 2
        back = group.wait_status(down, lambda s: s["purges"]["known_through"] == 2, timeout=10)
        assert back["purges"]["applied"] >= 1
        third = purge(group)
        killed = third["adapter"]
        group.adapters[killed].kill()  # the active dies right after the purge: a backup takes over
        new_active = promoted(group, instead_of=killed)
        sent = group.sent(timeout=30)
        deadline = time.monotonic() + DELAY_S + 20
        purged_seqs = {r["first_msg_seq"] for r in (first, second, third)}
        while time.monotonic() < deadline and len(watch.delivered) + len(watch.purged) < sent:
            time.sleep(0.1)  # poll interval of a deadline-bounded wait
        watch.stop.set()
        watch.join(10)
        survivors = [n for n in (1, 2, 3) if n != killed]
        final = {n: group.status(n) for n in survivors}
        held_third = JournalReader(group.journal(new_active)).read_range(
            third["first_msg_seq"], third["first_msg_seq"]
        )
    assert set(watch.purged) == purged_seqs  # a Purged event for each purged message
    assert watch.duplicates == 0
    assert len(watch.delivered) + len(watch.purged) == sent  # nothing lost
    for number, carried in watch.carried.items():  # no delayed line ever sent a purged message
        assert all(carried[seq] == wire.TOMBSTONE_STREAM for seq in purged_seqs if seq in carried), number
    assert final[new_active]["role"] == "active"
    # The new active sends the tombstone of the last purge unless its own journal lacks that
    # message: a backup that falls behind under load adopts the active's snapshot and drops what
    # waited to be published, a hole its lines share and the client fills from another line.
    seq = third["first_msg_seq"]
    if held_third:
        assert seq in watch.carried[new_active], final[new_active]["snapshots_adopted"]
    else:
        assert final[new_active]["snapshots_adopted"] > 0  # the only way a backup's journal has a hole
    assert all(final[n]["purges"]["known_through"] == 3 for n in survivors)
