"""An active's long turn does not read as silence: its report is repeated on the sync bus meanwhile.

A real SyncLink on 127.0.0.1 (adapter/sync_link.py) and a peer's SUB: while the loop thread is
busy inside ``keepalive`` (as folding a large state for a checkpoint keeps it), the report goes out
every heartbeat interval; the loop's own sends inside the block still go out, one at a time; and
nothing is repeated after the block, or past its limit.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import zmq

from feedha.adapter.config import AdapterConfig
from feedha.adapter.core import syncbus
from feedha.adapter.core.sync_types import Role
from feedha.adapter.runner import burn_cpu
from feedha.adapter.sync_link import SyncLink
from feedha.adapter.zap import DataPlaneGuard
from feedha.ports import free_ports

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def bus() -> Iterator[tuple[SyncLink, zmq.Socket[bytes]]]:
    (port,) = free_ports(1)
    config = AdapterConfig(
        channel="EQ", channel_number=3, adapter=1, source_endpoint="tcp://127.0.0.1:1",
        line_endpoint="tcp://127.0.0.1:*", sync_endpoint=f"tcp://127.0.0.1:{port}", source_stream="A-Z",
        source_stream_number=1,
    )  # fmt: skip
    link = SyncLink(config, DataPlaneGuard(adapter=1, keys=None, sync_keys=None))
    link.open()
    peer = zmq.Context.instance().socket(zmq.SUB)
    peer.linger = 0
    peer.subscribe(b"")
    peer.connect(config.sync_endpoint)
    try:
        report = _report(0)
        deadline = time.monotonic() + 30
        while not peer.poll(50):  # the slow joiner: send until the peer hears one
            assert time.monotonic() < deadline, "the peer never heard the bus"
            link.send(report)
        while peer.poll(100):
            peer.recv()
        yield link, peer
    finally:
        peer.close(linger=0)
        link.close()


def _report(last_source_seq: int) -> syncbus.StreamState:
    sender = syncbus.Sender(1, 1, Role.ACTIVE, 0)
    return syncbus.StreamState(
        sender, 1, last_source_seq + 1, last_source_seq + 1, last_source_seq, last_source_seq, 7
    )


def _heard(peer: zmq.Socket[bytes], within_s: float) -> list[syncbus.SyncMessage]:
    out, deadline = [], time.monotonic() + within_s
    while (left := deadline - time.monotonic()) > 0:
        if peer.poll(int(left * 1000) + 1):
            out.append(syncbus.decode_sync(peer.recv(), channel=3))
    return out


def test_the_report_is_repeated_while_the_loop_is_busy_and_not_after(
    bus: tuple[SyncLink, zmq.Socket[bytes]],
) -> None:
    link, peer = bus
    with link.keepalive(_report(41), every_s=0.01):
        time.sleep(0.3)  # the loop thread busy with one long turn (what the test stands for)
        link.send(_report(42))  # the loop's own send inside the block goes out too
        time.sleep(0.1)
    heard = _heard(peer, 0.3)
    positions = [message.last_source_seq for message in heard if isinstance(message, syncbus.StreamState)]
    assert positions.count(41) >= 5 and positions.count(42) == 1
    assert link.keepalives == positions.count(41)
    assert _heard(peer, 0.2) == []  # nothing repeated once the block ended


def test_a_turn_longer_than_the_limit_stops_being_covered(bus: tuple[SyncLink, zmq.Socket[bytes]]) -> None:
    link, peer = bus
    with link.keepalive(_report(9), every_s=0.01, at_most_s=0.1):
        time.sleep(0.5)  # a hung loop: after the limit the group may see it silent and elect
    heard = _heard(peer, 0.2)
    assert 1 <= len(heard) <= 12


@pytest.mark.parametrize("hold_gil", [False, True])
def test_a_busy_turn_that_holds_the_interpreter_silences_the_keepalive(
    bus: tuple[SyncLink, zmq.Socket[bytes]], hold_gil: bool
) -> None:
    # The ``busy`` fault injection's stretch (adapter/runner.py burn_cpu): one that lets the
    # interpreter go is covered like a checkpoint's fold; one that holds it, as a long C call
    # does, starves the keepalive's thread, and the group sees the active silent.
    link, peer = bus
    with link.keepalive(_report(5), every_s=0.01):
        burn_cpu(0.3, hold_gil=hold_gil)
    repeats = [m for m in _heard(peer, 0.3) if isinstance(m, syncbus.StreamState)]
    if hold_gil:
        assert len(repeats) <= 1  # at most the one it sends once it gets the interpreter back
    else:
        assert len(repeats) >= 3
