"""The source pump (adapter/_pump.c, adapter/source_pump.py) against the Python loop, on real sockets.

Two kinds of test:

* a whole adapter process with the pump and one without it (``--no-source-pump``)
  take the same hostile stream; their lines, read with raw taps and decoded from
  the public wire format (tests/integration/probes.py), must carry the same
  messages under the same numbers, and the pumped one must have stopped at the
  poison and given it to the Python path; with a backup, the backup's line must be the
  active's, and the active's health reports on the sync bus must carry its machine sample;
* the C pump driven directly over real ZeroMQ sockets on loopback: every reason
  it comes back for, what it books, the packets it builds (against
  ``proto.wire.PacketBuilder``) and what it does with a journal that fails.
"""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
import zmq

from feedha.adapter.conversion.state import DIGEST_MASK
from feedha.adapter.core import syncbus
from feedha.adapter.core.output import UNBOUNDED_ROOM
from feedha.adapter.core.pump_reference import LineIdentity, pump_frames
from feedha.adapter.core.pumping import HeldKind, Pumped, PumpMode, PumpPlan, PumpStop
from feedha.adapter.core.sync_types import Role
from feedha.adapter.errors import ConversionError
from feedha.adapter.formats.registry import engine_for_format
from feedha.adapter.journal import FsyncPolicy, JournalConfig, JournalReader, JournalWriter
from feedha.adapter.journal import _native as journal_native
from feedha.adapter.journal.errors import JournalClosedError, SequenceError
from feedha.proto import fix, market_pb2, wire
from tests.integration.groups import running_group
from tests.integration.probes import CHANNEL, STREAM, Source, decode_line_blocks
from tests.integration.waiting import asleep_in_poll, knows_poll_calls, wait_until

_pump = pytest.importorskip("feedha.adapter._pump", reason="the source pump's extension is not built")

# ---- a whole adapter, with the pump and without ------------------------------------------


def _lines(
    group: Any,
    seconds: float,
    rate: float,
    adapters: tuple[int, ...] = (1,),
    health: list[syncbus.Health] | None = None,
) -> tuple[list[dict[int, tuple[int, bytes]]], list[dict[str, Any]]]:
    """Run the test source through the group (adapter 1 active); each adapter's line (msg_seq ->
    (source_seq, payload sans publish time)) and its final status. With ``health``, the
    ``Health`` reports adapter 1 sends on its sync bus meanwhile are appended to it."""
    source = Source(group.source_endpoint, rate=rate, seconds=seconds)
    taps: list[zmq.Socket[bytes]] = []
    for n in adapters:
        tap: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
        tap.linger, tap.rcvhwm = 0, 0
        tap.subscribe(CHANNEL.encode())
        tap.connect(group.plan.adapter(n).line)
        taps.append(tap)
    sync_tap: zmq.Socket[bytes] | None = None
    if health is not None:  # only a test that reads the sync bus joins it
        sync_tap = zmq.Context.instance().socket(zmq.SUB)
        sync_tap.linger = 0
        sync_tap.subscribe(b"")
        sync_tap.connect(group.plan.adapter(1).sync)
    lines: list[dict[int, tuple[int, bytes]]] = [{} for _ in adapters]

    def drain(timeout_ms: int) -> int:
        got = 0
        while health is not None and sync_tap is not None and sync_tap.poll(0):
            message = syncbus.decode_sync(sync_tap.recv(), channel=1)
            if isinstance(message, syncbus.Health) and message.sender.adapter == 1:
                health.append(message)
        for tap, line in zip(taps, lines, strict=True):
            wait = timeout_ms
            while tap.poll(wait):
                wait = 0
                _topic, packet = tap.recv_multipart()
                for msg_seq, source_seq, payload in decode_line_blocks(packet):
                    update = market_pb2.MarketUpdate.FromString(payload)
                    update.publish_time_ns = 0  # the one field that differs from run to run
                    assert msg_seq not in line, f"msg_seq {msg_seq} twice"
                    line[msg_seq] = (source_seq, update.SerializeToString(deterministic=True))
                    got += 1
        return got

    try:
        group.wait_status(1, lambda s: s["role"] == "active", 10)
        for n in adapters[1:]:
            group.wait_status(n, lambda s: s["role"] == "backup", 20)
        source.wait_subscribers(len(group.adapters), 20)
        deadline = time.monotonic() + seconds + 30
        while not source.done and time.monotonic() < deadline:
            source.send_due()
            drain(1)
        quiet_until = time.monotonic() + 0.5
        while time.monotonic() < quiet_until:  # the tail: until nothing came for half a second
            if drain(50):
                quiet_until = time.monotonic() + 0.5
        return lines, [group.status(n) for n in adapters]
    finally:
        for tap in taps if sync_tap is None else (*taps, sync_tap):
            tap.close(linger=0)
        source.close()


def test_the_pumped_line_carries_what_the_python_loop_puts_on_it() -> None:
    lines, statuses = [], []
    for extra in ((), ("--no-source-pump",)):
        with running_group(channel=CHANNEL, channel_number=1, size=1, rate=6000, seconds=1.0) as group:
            group.start_adapter(1, active=True, extra=extra)
            (line,), (status,) = _lines(group, seconds=1.0, rate=6000.0)
        lines.append(line)
        statuses.append(status)
    pumped, python = lines
    assert len(pumped) > 5000 and sorted(pumped) == list(range(1, len(pumped) + 1))
    assert pumped == python  # same numbers, same source positions, same messages
    assert statuses[0]["quarantined"] == statuses[1]["quarantined"] and statuses[0]["quarantined"]
    assert statuses[0]["digest"] == statuses[1]["digest"]
    pump = statuses[0]["source_pump"]
    assert pump["runs"] > 0 and pump["handed_back"] > 0, pump  # poison went to the Python path
    assert "source_pump" not in statuses[1]


def test_a_backup_s_pump_reads_in_batches_until_the_report_and_its_line_is_the_active_s() -> None:
    # A backup's output waits at its gate for the active's next report: its pump reads the
    # source in batches inside one call and comes back when the report (the sync bus) speaks,
    # not after every batch (the old pace: a Python turn a millisecond, each "drained").
    health: list[syncbus.Health] = []
    with running_group(channel=CHANNEL, channel_number=1, size=2, rate=4000, seconds=1.5) as group:
        group.start_adapter(1, active=True)
        group.start_adapter(2)
        (active, backup), statuses = _lines(group, seconds=1.5, rate=4000.0, adapters=(1, 2), health=health)
    assert len(active) > 4000 and sorted(active) == list(range(1, len(active) + 1))
    assert backup == active  # the backup's line: the same messages under the same numbers
    pump = statuses[1]["source_pump"]
    assert pump["runs"] > 0, pump
    assert pump["stops"]["drained"] < pump["stops"]["socket"], pump  # it waits for the report in C
    # The active's pump sends its heartbeat reports itself (every 10 ms): its calls end for the
    # core's other timers (health, the machine sample: every 0.1 s), not for every heartbeat.
    active_pump = statuses[0]["source_pump"]
    assert active_pump["reports"] > 3 * active_pump["stops"]["deadline"], active_pump
    # The active's health reports carry what it measured of its machine: its CPU share from
    # its own process time (no /proc read on the loop's thread) and the machine's available
    # memory, sampled once a second; the group elects and fails by them.
    assert len(health) >= 5, len(health)
    total_mb = psutil.virtual_memory().total / 2**20
    assert all(0 < r.available_memory_mb <= total_mb for r in health), health[-1]
    shares = [r.cpu_percent for r in health]
    assert all(0.0 <= share <= 100.0 * (os.cpu_count() or 1) + 5.0 for share in shares), shares
    assert max(shares) > 1.0, shares  # converting thousands of messages a second costs some CPU


# ---- the C pump on its own ---------------------------------------------------------------

MAX_PACKET = 1200


@dataclass
class Rig:
    """Real sockets on loopback around one C pump: a source PUB, a sync PUB, a control REQ, a line tap."""

    pump: Any
    engine: Any
    source_pub: zmq.Socket[bytes]
    sync_pub: zmq.Socket[bytes]
    control_req: zmq.Socket[bytes]
    source: zmq.Socket[bytes]
    sync: zmq.Socket[bytes]
    control: zmq.Socket[bytes]
    line: zmq.Socket[bytes]
    tap: zmq.Socket[bytes]
    journaled: list[tuple[int, int, int, list[bytes]]]

    def run(self, *, deadline_s: float = 1.0, expect: int = 0, msg_seq: int = 1, frames: int = 10_000,
            journal: bool = False, max_bytes: int = 1 << 30, mode: PumpMode = PumpMode.SEND,
            stop_seq: int = 0, wait: bool = True, batch_s: float = 0.0,
            report: tuple[Any, ...] | None = None, journal_upto: int = 0) -> Pumped:  # fmt: skip
        deadline = time.monotonic_ns() + int(deadline_s * 1e9)
        raw = self.pump.run(
            self.source.underlying, self.sync.underlying, self.control.underlying, self.line.underlying,
            deadline, deadline if wait else 0, expect, stop_seq, msg_seq, 7, int(mode), journal,
            frames, max_bytes, int(batch_s * 1e9), report, journal_upto,
        )  # fmt: skip
        return Pumped._make(raw)

    def send(self, *messages: bytes, parts: list[bytes] | None = None) -> None:
        self.source_pub.send_multipart(parts if parts is not None else [STREAM, b"".join(messages)])

    def packets(self, timeout_ms: int = 500) -> list[bytes]:
        out = []
        while self.tap.poll(timeout_ms):
            timeout_ms = 50
            out.append(self.tap.recv_multipart()[1])
        return out


def _message(seq: int, symbol: str = "IBM", price: str = "101.25") -> bytes:
    entry = fix.SourceEntry(fix.ENTRY_TRADE, price, 1 + seq % 7)
    event_time_ns = 1_790_000_000_000_000_000 + seq
    return fix.encode_market_data(source_seq=seq, symbol=symbol, event_time_ns=event_time_ns, entries=[entry])


def _connected(sub: zmq.Socket[bytes], pub: zmq.Socket[bytes], probe: list[bytes]) -> None:
    # PUB/SUB slow joiner: publish a probe until it arrives, then drop it.
    deadline = time.monotonic() + 10
    while not sub.poll(20):
        assert time.monotonic() < deadline, "the subscription never arrived"
        pub.send_multipart(probe)
    while sub.poll(50):
        sub.recv_multipart()


@contextmanager
def rig(
    *, journal_refuses: Callable[[int], bool] | None = None, before_run: Callable[[], None] | None = None
) -> Iterator[Rig]:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    made: list[zmq.Socket[bytes]] = []

    def sock(kind: int) -> zmq.Socket[bytes]:
        s = ctx.socket(kind)
        s.linger = 0
        made.append(s)
        return s

    source_pub, source, sync_pub, sync = sock(zmq.PUB), sock(zmq.SUB), sock(zmq.PUB), sock(zmq.SUB)
    control_req, control, line, tap = sock(zmq.REQ), sock(zmq.REP), sock(zmq.PUB), sock(zmq.SUB)
    for pub, sub, topic in (
        (source_pub, source, STREAM),
        (sync_pub, sync, b""),
        (line, tap, CHANNEL.encode()),
    ):
        port = pub.bind_to_random_port("tcp://127.0.0.1")
        sub.subscribe(topic)
        sub.connect(f"tcp://127.0.0.1:{port}")
        pub.sndhwm = sub.rcvhwm = 0
    control_req.connect(f"tcp://127.0.0.1:{control.bind_to_random_port('tcp://127.0.0.1')}")
    engine = engine_for_format("feedha-fix")
    journaled: list[tuple[int, int, int, list[bytes]]] = []
    calls = 0

    def journal(
        first_msg_seq: int, time_ns: int, _stream: int, source_seqs: Any, payloads: list[bytes]
    ) -> None:
        # A writer's append_batch: a fresh Appender (no live buffer yet) hands it every record.
        nonlocal calls
        calls += 1
        if journal_refuses is not None and journal_refuses(calls):
            raise OSError("disk full")
        journaled.append((first_msg_seq, time_ns, source_seqs[0], list(payloads)))

    run = engine.run_function()
    if before_run is not None:  # a hook inside the pump's call, before each run it converts
        inner = run

        def run(*args: Any) -> Any:
            before_run()
            return inner(*args)

    pump = _pump.Pump(run, None, journal_native.Appender(journal), CHANNEL.encode(), 3, 2, 1, MAX_PACKET)
    try:
        _connected(source, source_pub, [STREAM, b"probe"])
        _connected(sync, sync_pub, [b"probe"])
        _connected(tap, line, [CHANNEL.encode(), b"probe"])
        yield Rig(
            pump, engine, source_pub, sync_pub, control_req, source, sync, control, line, tap, journaled
        )
    finally:
        for s in made:
            s.close(linger=0)


def test_the_pump_converts_numbers_and_sends_what_comes_and_stops_at_its_deadline() -> None:
    with rig() as r:
        r.send(*(_message(seq) for seq in range(1, 51)))
        r.send(*(_message(seq, "MSFT") for seq in range(51, 101)))
        started = time.monotonic()
        pumped = r.run(deadline_s=0.3)
        waited = time.monotonic() - started
        packets = r.packets()
    assert pumped.stop == PumpStop.DEADLINE and waited >= 0.29
    assert (pumped.first_source_seq, pumped.first_msg_seq, pumped.messages) == (1, 1, 100)
    assert pumped.leftover is None and pumped.error is None
    assert [count for _frame, count in pumped.frames] == [50, 50]
    assert pumped.packets == len(packets) and pumped.bytes_sent == sum(map(len, packets))
    assert pumped.last_send_ns > 0
    # The digests are the engine's, message by message: the last is the state's now.
    digests = memoryview(pumped.digests).cast("Q")
    assert len(digests) == 100 and digests[-1] == r.engine.state.digest & DIGEST_MASK
    # Every packet is what wire.PacketBuilder builds from the same blocks (its send time aside).
    seen = []
    for packet in packets:
        header = wire.decode_header(packet)
        assert (header.channel, header.adapter, header.term, header.flags) == (3, 2, 7, 0)
        assert len(packet) <= MAX_PACKET
        blocks = list(decode_line_blocks(packet))
        builder = wire.PacketBuilder(MAX_PACKET)
        for msg_seq, source_seq, payload in blocks:
            builder.add(msg_seq, 1, source_seq, payload)
        rebuilt = builder.build(channel=3, adapter=2, term=7, send_time_ns=header.send_time_ns)
        assert rebuilt == packet
        seen += [(m, s) for m, s, _p in blocks]
    assert seen == [(n, n) for n in range(1, 101)]


def test_the_pump_stops_for_the_sync_bus_and_the_control_socket() -> None:
    with rig() as r:
        r.sync_pub.send(b"a peer speaks")
        assert r.sync.poll(2000)
        assert r.run().stop == PumpStop.SOCKET
        r.sync.recv()
        r.control_req.send(b"{}")
        assert r.control.poll(2000)
        assert r.run().stop == PumpStop.SOCKET


def test_a_peer_that_speaks_during_a_call_stops_the_pump_before_the_next_frame() -> None:
    # The pump finds both sockets quiet before the first frame and then looks only at their
    # ZMQ_FDs until one turns readable: a message that comes meanwhile, on either socket, must
    # still stop it before the next frame, which is queued by then.
    rigged: list[Rig] = []
    speakers: list[Callable[[Rig], zmq.Socket[bytes]]] = []

    def a_peer_speaks() -> None:  # inside the call, converting frame 1: once
        if not speakers:
            return
        r = rigged[0]
        listening = speakers.pop()(r)
        # Watched as the pump watches it: asking ZMQ_EVENTS here would take the signal.
        readable, _w, _x = select.select([listening.getsockopt(zmq.FD)], [], [], 5.0)
        assert readable, "the message never reached the socket"
        r.send(_message(2))
        assert r.source.poll(2000)  # frame 2 is queued: only the peer's word can stop the pump

    def on_sync(r: Rig) -> zmq.Socket[bytes]:
        r.sync_pub.send(b"a peer speaks")
        return r.sync

    def on_control(r: Rig) -> zmq.Socket[bytes]:
        r.control_req.send(b"{}")
        return r.control

    for speak in (on_sync, on_control):
        with rig(before_run=a_peer_speaks) as r:
            rigged[:] = [r]
            speakers[:] = [speak]
            r.send(_message(1))
            assert r.source.poll(2000)
            pumped = r.run(deadline_s=2.0)
        assert not speakers and pumped.stop == PumpStop.SOCKET, pumped
        assert pumped.messages == 1 and len(pumped.frames) == 1, pumped  # frame 2 waits


@knows_poll_calls
def test_what_comes_while_the_pump_waits_wakes_it_at_once() -> None:
    # Once every socket has said it has nothing (the source's receive found nothing, the sync
    # bus and the control socket answered ZMQ_EVENTS), the pump's wait is one poll() of their
    # fds, not zmq_poll. A frame that comes while it sleeps there must wake it: it is taken and
    # sent; a peer's word that comes while it sleeps again must end the call. Both long before
    # the deadline: a wake-up missed would sleep until it.
    pump_thread = threading.get_native_id()
    seen: dict[str, Any] = {}
    with rig() as r:

        def stimulus() -> None:  # the tap is this thread's alone while the pump runs
            wait_until(lambda: asleep_in_poll(pump_thread), 10, "the pump asleep in its wait", interval=0.005)
            r.send(_message(1))
            seen["packet"] = r.tap.poll(10_000)
            wait_until(lambda: asleep_in_poll(pump_thread), 10, "the pump asleep again", interval=0.005)
            r.sync_pub.send(b"a report")

        stimulating = threading.Thread(target=stimulus)
        stimulating.start()
        started = time.monotonic()
        pumped = r.run(deadline_s=60.0)
        took = time.monotonic() - started
        stimulating.join()
    assert seen.get("packet"), "the frame that came during the wait never went out"
    assert pumped.stop == PumpStop.SOCKET and pumped.messages == 1, pumped
    assert took < 30.0, f"woken by the deadline after {took:.1f} s, not by what came"


def _flow_and_speak(ports: Any, words: int, frames: int) -> None:
    """A child process: the source's frames (20 messages each, numbered on) as fast as it can send
    them, and after every few frames a peer's word on the sync bus stamped with the monotonic clock,
    the next once the parent acknowledged the last. Bounded: ``frames`` frames, then the words left,
    each once the last was acknowledged (20 s at most for each)."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        source, sync, acks = ctx.socket(zmq.XPUB), ctx.socket(zmq.XPUB), ctx.socket(zmq.PULL)
        source.sndhwm = sync.sndhwm = 0
        ports.send([s.bind_to_random_port("tcp://127.0.0.1") for s in (source, sync, acks)])
        if not (source.poll(20_000) and sync.poll(20_000)):
            return  # the parent never subscribed
        source.recv()  # the subscriptions: what goes out from now on arrives
        sync.recv()
        encoded = [
            b"".join(_message(seq) for seq in range(first, first + 20)) for first in range(1, frames * 20, 20)
        ]
        words_left, pending = words, False
        for n, frame in enumerate(encoded):
            source.send_multipart([STREAM, frame])
            if pending and acks.poll(0):
                acks.recv()
                pending = False
            if not pending and words_left and n % 7 == 3:  # a word in the midst of the flow
                sync.send(str(time.monotonic()).encode())
                words_left, pending = words_left - 1, True
        while words_left or pending:  # the flow is over: each word left once the last was acknowledged
            if pending:
                if not acks.poll(20_000):
                    return
                acks.recv()
                pending = False
            if words_left:
                sync.send(str(time.monotonic()).encode())
                words_left, pending = words_left - 1, True
    finally:
        ctx.destroy(linger=0)


def test_a_peer_s_word_ends_the_pump_s_call_wherever_it_comes_while_the_source_floods() -> None:
    # The sync bus is quiet once ZMQ_EVENTS said it has nothing, and then only its fd is looked at
    # (before every frame, and in the wait). A word that came and was not seen would wait for the
    # call's deadline. A child process floods the source and speaks on the sync bus again and again
    # (its words land in the drain, between frames, in the wait): every one must end the call, long
    # before its 20 s deadline. Another process, so that no GIL decides when a word can be sent.
    words, frames = 150, 3000
    spawn = multiprocessing.get_context("spawn")
    ours, theirs = spawn.Pipe()
    child = spawn.Process(target=_flow_and_speak, args=(theirs, words, frames), daemon=True)
    child.start()
    acks: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.PUSH)
    acks.linger = 0
    try:
        with rig() as r:
            assert ours.poll(30), "the child never said where it listens"
            source_port, sync_port, acks_port = ours.recv()
            r.source.connect(f"tcp://127.0.0.1:{source_port}")
            r.sync.connect(f"tcp://127.0.0.1:{sync_port}")
            acks.connect(f"tcp://127.0.0.1:{acks_port}")
            waited: list[float] = []
            stops: list[int] = []
            expect, msg_seq, converted, ahead = 0, 1, 0, 0
            give_up = time.monotonic() + 120
            while len(waited) < words and time.monotonic() < give_up:
                pumped = r.run(deadline_s=20.0, expect=expect, msg_seq=msg_seq)
                stops.append(pumped.stop)
                assert pumped.leftover is None and pumped.error is None, pumped
                if pumped.messages:
                    expect = pumped.first_source_seq + pumped.messages
                    msg_seq = pumped.first_msg_seq + pumped.messages
                    converted += pumped.messages
                if pumped.stop == PumpStop.SOCKET:
                    waited.append(time.monotonic() - float(r.sync.recv()))
                    ahead += bool(r.source.poll(0))
                    acks.send(b"")
    finally:
        acks.close(linger=0)
        child.join(30)
        if child.is_alive():
            child.kill()
    assert len(waited) == words and set(stops) == {PumpStop.SOCKET}, (len(waited), set(stops))
    assert max(waited) < 10.0, f"a word waited {max(waited):.1f} s: its wake-up was missed"
    assert converted > 10 * words  # the words came while the source flowed, not after it
    # ... and a word ends the call in the midst of the drain, not once the source ran dry: most
    # calls it ends leave frames queued (a drain that looked at the sync bus's fd only in its
    # wait left 1-2 of 150 so, this one 111-150).
    assert ahead >= words // 3, f"only {ahead} of {words} words ended a call with frames still queued"


def test_a_batch_s_rest_ends_at_the_group_s_word_or_the_deadline_with_what_it_holds() -> None:
    # Between batches the pump leaves the source alone but still watches the sync bus and the
    # control socket: a report ends a rest far longer than the test, and a rest that reaches the
    # deadline ends the call with the held packet and records.
    converting = threading.Event()
    with rig(before_run=converting.set) as r:

        def report_later() -> None:  # once the pump converts frame 1 and, most likely, rests
            if converting.wait(10):
                time.sleep(0.05)  # the stimulus' timing only: a report sooner ends the call as well
                r.sync_pub.send(b"a report")

        reporter = threading.Thread(target=report_later)
        r.send(_message(1))
        assert r.source.poll(2000)
        reporter.start()
        started = time.monotonic()
        pumped = r.run(mode=PumpMode.HOLD, deadline_s=60.0, batch_s=30.0, journal=True)
        reporter.join()
        assert pumped.stop == PumpStop.SOCKET and pumped.messages == 1, pumped
        assert time.monotonic() - started < 20.0  # not the rest's 30 s
        assert pumped.held is not None and [item[0] for item in pumped.held] == [
            HeldKind.RECORDS,
            HeldKind.PACKET,
        ]
    with rig() as r:
        r.send(_message(1))
        assert r.source.poll(2000)
        pumped = r.run(mode=PumpMode.HOLD, deadline_s=0.2, batch_s=30.0, journal=True)
        assert pumped.stop == PumpStop.DEADLINE and pumped.messages == 1, pumped
        assert pumped.held is not None and [item[0] for item in pumped.held] == [
            HeldKind.RECORDS,
            HeldKind.PACKET,
        ]


def test_what_the_pump_does_not_take_whole_goes_back_with_where_it_stopped() -> None:
    with rig() as r:
        # A frame of three messages, the third out of sequence (the careful path decides).
        r.send(_message(1), _message(2), _message(9))
        pumped = r.run()
        assert pumped.stop == PumpStop.FRAME and pumped.messages == 2
        assert pumped.leftover is not None and pumped.leftover_frame == pumped.leftover[1]
        assert pumped.leftover_converted == 2
        assert pumped.leftover_frame[pumped.leftover_pos :] == _message(9)
        assert pumped.frames == []  # the stopped frame is booked by the Python path, whole
        assert [s for _m, s, _p in decode_line_blocks(r.packets()[0])] == [1, 2]  # sent before it came back
        # A message of three parts is nobody's to convert: back as it came.
        r.send(parts=[STREAM, b"x", b"y"])
        pumped = r.run(expect=3, msg_seq=3)
        assert pumped.stop == PumpStop.FRAME and pumped.messages == 0
        assert pumped.leftover == [STREAM, b"x", b"y"] and pumped.leftover_frame is None


def test_a_run_function_that_raises_hands_the_frame_back_untouched() -> None:
    def broken(*_args: Any) -> Any:
        raise ConversionError("internal_error", "a bug")

    with rig() as r:
        r.pump = _pump.Pump(broken, None, None, CHANNEL.encode(), 3, 2, 1, MAX_PACKET)
        r.send(_message(1))
        pumped = r.run()
    assert pumped.stop == PumpStop.FRAME and pumped.messages == 0 and pumped.leftover_pos == 0
    assert pumped.error is None  # the Python path calls it again and quarantines the frame


def test_the_pump_journals_each_packet_once_before_it_goes_and_books_a_failing_journal() -> None:
    # Three frames of one message each, the next one queued while the pump converts the one
    # before it: three runs, one packet, one journal call with the three records (the time of
    # the latest frame).
    rigged: list[Rig] = []
    sent_at: list[int] = []

    def next_frame_comes() -> None:
        if len(sent_at) < 3:
            sent_at.append(time.time_ns())
            rigged[0].send(_message(len(sent_at)))
            assert rigged[0].source.poll(2000)

    with rig(before_run=next_frame_comes) as r:
        rigged.append(r)
        next_frame_comes()
        pumped = r.run(journal=True, deadline_s=0.2)
        packets = r.packets(timeout_ms=200)
        journaled = list(r.journaled)
    assert pumped.error is None and pumped.messages == 3 and len(pumped.frames) == 3
    assert [[m for m, _s, _p in decode_line_blocks(p)] for p in packets] == [[1, 2, 3]]
    assert [(m, s, len(p)) for m, _t, s, p in journaled] == [(1, 1, 3)]
    assert journaled[0][1] >= sent_at[-1]
    with rig(journal_refuses=lambda _call: True) as r:
        r.send(*(_message(seq) for seq in range(1, 4)))
        pumped = r.run(journal=True)
        packets = r.packets(timeout_ms=200)
    # Nothing was sent that the journal does not hold; the run is booked (the engine's state
    # has it) and the error comes back with the booking.
    assert pumped.stop == PumpStop.ERROR and isinstance(pumped.error, OSError)
    assert (pumped.first_msg_seq, pumped.messages, len(pumped.digests)) == (1, 3, 3 * 8) and packets == []
    assert pumped.frames == [(b"".join(_message(seq) for seq in range(1, 4)), 3)] and pumped.leftover is None


def test_a_packet_the_journal_refuses_mid_frame_is_dropped_its_runs_booked_and_the_rest_handed_back() -> None:
    # The second journal call fails once: the second packet, filled by a frame that spans
    # packets. Its runs are numbered (the engine's state has them) and kept off the line; the
    # pump stops there and hands back the rest of the frame. The Python twin does the same.
    first, second = (b"".join(_message(seq) for seq in seqs) for seqs in (range(1, 4), range(4, 41)))
    rigged: list[Rig] = []

    def second_is_queued() -> None:  # converting frame 1 (taken off the socket): frame 2 is next
        if rigged:
            assert rigged.pop().source.poll(2000), "frame 2 never came"

    with rig(journal_refuses=lambda call: call == 2, before_run=second_is_queued) as r:
        rigged.append(r)
        r.send(first)
        r.send(second)
        assert r.source.poll(2000)
        pumped = r.run(journal=True, deadline_s=0.3)
        packets = r.packets(timeout_ms=200)
        journaled = list(r.journaled)
    assert pumped.stop == PumpStop.ERROR and isinstance(pumped.error, OSError)
    sent = [(m, s) for p in packets for m, s, _p in decode_line_blocks(p)]
    n, booked = len(sent), pumped.messages
    assert len(packets) == 1 and n > 3 and sent == [(seq, seq) for seq in range(1, n + 1)]
    assert [(m, s, len(p)) for m, _t, s, p in journaled] == [(1, 1, n)]  # what went out, in one call
    assert n < booked < 40 and len(pumped.digests) == 8 * booked and pumped.leftover_converted == booked - 3
    assert pumped.frames == [(first, 3)]  # the stopped frame is booked whole by the Python path
    assert pumped.leftover == [STREAM, second] and pumped.leftover_frame == second
    assert second[pumped.leftover_pos :] == b"".join(_message(seq) for seq in range(booked + 1, 41))

    def refuse_second(first_msg_seq: int, _time_ns: int, _stream: int, _seqs: Any, _payloads: Any) -> None:
        if first_msg_seq != 1:
            raise OSError("disk full")

    plan = PumpPlan(mode=PumpMode.SEND, deadline=1.0, wait=1.0, expect_seq=0, stop_seq=0, next_msg_seq=1,
                    term=7, journal=True)  # fmt: skip
    twin_engine = engine_for_format("feedha-fix")
    twin, twin_packets = pump_frames(
        plan,
        [[STREAM, first], [STREAM, second]],
        run=twin_engine.run_function(),
        frame_of=None,
        journal=refuse_second,
        line=LineIdentity(3, 2, 1, MAX_PACKET),
        wall_ns=time.time_ns(),
        now_ns=2,
    )  # fmt: skip  (a publish time of the same size: the same blocks fill a packet)
    assert twin._replace(error=None, last_send_ns=0) == pumped._replace(error=None, last_send_ns=0)
    assert isinstance(twin.error, OSError)
    assert [[(m, s) for m, s, _p in decode_line_blocks(p)] for p in twin_packets] == [sent]
    # The Python path goes on from where the pump stopped: the next message, the next number.
    pos, count, _stop, _blocks, first_seq, _digests, _payloads = twin_engine.run_function()(
        second, twin.leftover_pos, booked + 1, 0, UNBOUNDED_ROOM, 1 << 16, 1, 1, True, False
    )
    assert (first_seq, count, pos) == (booked + 1, 40 - booked, len(second))


def test_a_backup_s_pump_holds_its_packets_and_records_for_the_gate_in_order() -> None:
    with rig() as r:
        r.send(*(_message(seq) for seq in range(1, 31)))
        r.send(*(_message(seq) for seq in range(31, 41)))
        assert r.source.poll(2000)
        pumped = r.run(mode=PumpMode.HOLD, journal=True, deadline_s=0.3)
        on_the_line = r.packets(timeout_ms=100)
    assert on_the_line == []  # nothing sent: the gate decides
    assert pumped.held is not None and pumped.messages == 40
    records = [item for item in pumped.held if item[0] == HeldKind.RECORDS]
    packets = [item for item in pumped.held if item[0] == HeldKind.PACKET]
    assert sum(len(item[4]) for item in records) == 40 and pumped.packets == len(packets) > 1
    # Each packet follows the records of the messages it carries, and says how far it reaches.
    for index, item in enumerate(pumped.held):
        if item[0] == HeldKind.PACKET:
            _kind, packet, last_msg_seq, count, upto = item
            blocks = list(decode_line_blocks(packet))
            assert (blocks[-1][0], len(blocks), blocks[-1][1]) == (last_msg_seq, count, upto)
            journaled = [r for r in pumped.held[:index] if r[0] == HeldKind.RECORDS]
            assert journaled[-1][1] + len(journaled[-1][4]) - 1 >= last_msg_seq


def test_a_backup_s_pump_drains_all_that_is_queued_and_comes_back_without_waiting() -> None:
    frames = [b"".join(_message(seq) for seq in range(first, first + 5)) for first in range(1, 101, 5)]
    with rig() as r:
        for frame in frames:
            r.send(frame)
        got: list[int] = []
        deadline = time.monotonic() + 10
        while sum(got) < 100:  # what came by now each time; the last call takes the last frame
            assert time.monotonic() < deadline
            r.source.poll(1000)
            pumped = r.run(mode=PumpMode.HOLD, wait=False, expect=sum(got) + 1 if got else 0,
                           msg_seq=sum(got) + 1, journal=True)  # fmt: skip
            assert pumped.stop == PumpStop.DRAINED
            got.append(pumped.messages)
            # Runs of several frames with no packet sealed between them are one item of records.
            assert pumped.held is not None
            records = sum(1 for item in pumped.held if item[0] == HeldKind.RECORDS)
            assert records <= pumped.packets + 1 and (records < len(pumped.frames) or len(pumped.frames) < 3)
    assert sum(got) == 100 and len(got) < 20  # more than a frame a call: it drained, it did not stop at one


def test_a_backup_s_held_records_carry_the_time_their_own_frame_came() -> None:
    # The next frame comes while the pump converts the one before it (a slow turn), so the
    # pump takes it in the same call with no packet sealed in between. Its messages' records
    # must carry a time no earlier than it was sent: stamped with the first frame's time, a
    # message once left a backup's delayed line before it was due.
    sent_at: dict[int, int] = {}
    rigged: list[Rig] = []

    def send(seq: int) -> None:
        sent_at[seq] = time.time_ns()
        rigged[0].send(_message(seq))
        assert rigged[0].source.poll(2000)  # queued before the pump looks for more

    def next_frame_comes() -> None:  # inside the pump's call, after it read the clock for a frame
        if len(sent_at) < 3:
            send(len(sent_at) + 1)

    with rig(before_run=next_frame_comes) as r:
        rigged.append(r)
        send(1)
        pumped = r.run(mode=PumpMode.HOLD, journal=True, deadline_s=0.2)
    assert pumped.held is not None and pumped.messages == 3 and len(pumped.frames) == 3, pumped
    stamped = {
        item[1] + i: item[2]
        for item in pumped.held
        if item[0] == HeldKind.RECORDS
        for i in range(len(item[4]))
    }
    assert sorted(stamped) == [1, 2, 3]
    assert all(stamped[seq] >= sent_at[seq] for seq in stamped), (stamped, sent_at)
    assert sum(1 for item in pumped.held if item[0] == HeldKind.RECORDS) == 1  # still one item


def test_a_watched_position_stops_the_pump_before_it_and_convert_mode_builds_nothing() -> None:
    with rig() as r:
        r.send(*(_message(seq) for seq in range(1, 11)))
        pumped = r.run(mode=PumpMode.CONVERT, journal=True, stop_seq=6)
    assert pumped.stop == PumpStop.FRAME and pumped.messages == 5 and pumped.leftover_converted == 5
    assert pumped.packets == 0 and pumped.held is None
    assert pumped.leftover_frame is not None and pumped.leftover_frame[pumped.leftover_pos :].startswith(
        _message(6)
    )


def test_a_signal_interrupts_the_wait_and_its_handler_runs_first() -> None:
    caught = threading.Event()
    previous = signal.signal(signal.SIGALRM, lambda *_a: caught.set())
    try:
        with rig() as r:
            signal.setitimer(signal.ITIMER_REAL, 0.05)
            pumped = r.run(deadline_s=5.0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert pumped.stop == PumpStop.SIGNAL and caught.is_set()


def test_a_source_that_never_pauses_is_bounded_by_the_budget() -> None:
    with rig() as r:
        for seq in range(1, 6):
            r.send(_message(seq))
        pumped = r.run(frames=2, deadline_s=5.0)  # frames count over the call, however they arrive
    assert pumped.stop == PumpStop.BUDGET and len(pumped.frames) == 2 and pumped.messages == 2


def test_a_source_that_sends_big_frames_is_bounded_by_their_bytes() -> None:
    frames = [b"".join(_message(seq) for seq in range(first, first + 20)) for first in range(1, 101, 20)]
    with rig() as r:
        for frame in frames:
            r.send(frame)
        pumped = r.run(max_bytes=len(frames[0]) + len(frames[1]) + 1, deadline_s=5.0)
    assert pumped.stop == PumpStop.BUDGET and len(pumped.frames) == 3 and pumped.messages == 60


@contextmanager
def report_bus() -> Iterator[tuple[zmq.Socket[bytes], zmq.Socket[bytes]]]:
    """The adapter's own sync-bus PUB (which its SUB does not read) and a peer's SUB on it."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    pub, tap = ctx.socket(zmq.PUB), ctx.socket(zmq.SUB)
    try:
        pub.linger = tap.linger = 0
        tap.subscribe(b"")
        tap.connect(f"tcp://127.0.0.1:{pub.bind_to_random_port('tcp://127.0.0.1')}")
        _connected(tap, pub, [b"probe"])
        yield pub, tap
    finally:
        pub.close(linger=0)
        tap.close(linger=0)


def _reports(tap: zmq.Socket[bytes]) -> list[syncbus.StreamState]:
    out = []
    while tap.poll(200):
        message = syncbus.decode_sync(tap.recv(), channel=3)
        assert isinstance(message, syncbus.StreamState)
        out.append(message)
    return out


def test_an_active_s_pump_sends_its_heartbeat_reports_with_the_positions_it_reached() -> None:
    # The core hands the report's fixed parts and where the sequencer stands; the pump sends a
    # report when it is due, then one every interval, each with the positions of the last
    # message it numbered and the digest after it, the packet before it already on the line.
    template = syncbus.StreamState(
        syncbus.Sender(2, 7, Role.ACTIVE, 0), 1, 0, 0, 0, 0, 0, session=4, purge_seq=9
    )  # fmt: skip
    parts = syncbus.report_parts(template, channel=3)
    every = 0.02
    with rig() as r, report_bus() as (pub, tap):
        r.send(*(_message(seq) for seq in range(11, 61)))
        assert r.source.poll(2000)  # queued before the pump starts: the first report is due at once
        start = time.monotonic_ns()
        report = (pub.underlying, start, int(every * 1e9), *parts, 11, 10, 10, 1234)
        pumped = r.run(deadline_s=0.2, expect=11, msg_seq=11, report=report)
        packets = r.packets()
        reports = _reports(tap)
    assert pumped.stop == PumpStop.DEADLINE and pumped.messages == 50
    assert 5 <= pumped.reports == len(reports) <= 0.2 / every + 1, (pumped.reports, len(reports))
    assert start < pumped.last_report_ns < start + int(0.25e9)
    last_digest = memoryview(pumped.digests).cast("Q")[-1]
    for report_ in reports:
        assert report_.sender == syncbus.Sender(2, 7, Role.ACTIVE, report_.sender.send_time_ns)
        assert (report_.source_stream, report_.session, report_.purge_seq) == (1, 4, 9)
        # The frame came before the first report was due: every report is after its 50 messages.
        assert (report_.next_msg_seq, report_.next_source_seq, report_.last_source_seq) == (61, 61, 60)
        assert (report_.last_msg_seq, report_.digest) == (60, last_digest)
    times = [report_.sender.send_time_ns for report_ in reports]
    assert times == sorted(times) and times[-1] - times[0] >= (len(times) - 2) * every * 1e9
    assert sum(wire.decode_header(p).count for p in packets) == 50  # and those went out first
    # Nothing numbered yet: a report gives the positions the core handed over.
    with rig() as r, report_bus() as (pub, tap):
        report = (pub.underlying, time.monotonic_ns(), int(1e9), *parts, 11, 10, 10, 1234)
        pumped = r.run(deadline_s=0.05, expect=11, msg_seq=11, report=report)
        reports = _reports(tap)
    assert pumped.reports == len(reports) == 1 and pumped.messages == 0
    got = reports[0]
    assert (got.next_msg_seq, got.next_source_seq, got.last_source_seq, got.last_msg_seq, got.digest) == (
        11, 11, 10, 10, 1234,
    )  # fmt: skip


def test_a_report_whose_time_comes_while_the_pump_waits_goes_out_then() -> None:
    # An idle source: the pump sleeps until the report is due, sends it, sleeps again.
    parts = syncbus.report_parts(syncbus.StreamState(syncbus.Sender(2, 7, Role.ACTIVE, 0), 1, 0, 0, 0, 0, 0),
                                 channel=3)  # fmt: skip
    with rig() as r, report_bus() as (pub, tap):
        due = time.monotonic_ns() + int(0.05e9)
        pumped = r.run(deadline_s=0.15, expect=1, report=(pub.underlying, due, int(1e9), *parts, 1, 0, 0, 0))
        reports = _reports(tap)
    assert pumped.stop == PumpStop.DEADLINE and pumped.reports == len(reports) == 1
    assert due <= pumped.last_report_ns < due + int(0.09e9)


def test_the_pump_appends_to_a_journal_writer_in_c_and_skips_what_the_journal_holds(tmp_path: Path) -> None:
    # A restart after rule 2 numbered backwards: the journal holds 1..5, the pump numbers from 1
    # again. It journals none of 1..5 (it counts them skipped) and appends the rest to the
    # writer's live tail; the core books the counts (JournalPlan.took). The Python twin agrees.
    messages = [_message(seq) for seq in range(1, 61)]
    with JournalWriter(tmp_path, JournalConfig(fsync=FsyncPolicy.NONE)) as writer:
        writer.append_batch(1, 1, 1, range(1, 6), [b"old%d" % seq for seq in range(1, 6)])
        with rig() as r:
            r.pump = _pump.Pump(
                r.engine.run_function(), None, writer.appender, CHANNEL.encode(), 3, 2, 1, MAX_PACKET
            )
            r.send(*messages[:30])
            r.send(*messages[30:])
            pumped = r.run(journal=True, deadline_s=0.3, journal_upto=5)
            packets = r.packets()
        assert pumped.error is None and pumped.messages == 60 and len(packets) > 1
        assert (pumped.journaled, pumped.journal_skipped) == (55, 5)
        assert (pumped.journal_last_msg_seq, pumped.journal_last_source_seq) == (60, 60)
        assert writer.last_msg_seq == 60
    records = list(JournalReader(tmp_path).read())
    assert [r.payload for r in records[:5]] == [b"old%d" % seq for seq in range(1, 6)]  # not written again
    line = {m: p for packet in packets for m, _s, p in decode_line_blocks(packet)}
    assert [(r.msg_seq, r.source_seq, r.payload) for r in records[5:]] == [
        (m, m, line[m]) for m in range(6, 61)
    ]
    plan = PumpPlan(mode=PumpMode.SEND, deadline=1.0, wait=1.0, expect_seq=0, stop_seq=0, next_msg_seq=1,
                    term=7, journal=True, journaled_upto=5)  # fmt: skip
    appended: list[int] = []
    twin, _packets = pump_frames(
        plan, [[STREAM, b"".join(messages[:30])], [STREAM, b"".join(messages[30:])]],
        run=engine_for_format("feedha-fix").run_function(), frame_of=None,
        journal=lambda first, _t, _s, _q, payloads: appended.extend(range(first, first + len(payloads))),
        line=LineIdentity(3, 2, 1, MAX_PACKET), wall_ns=time.time_ns(), now_ns=2,
    )  # fmt: skip
    assert (twin.journaled, twin.journal_skipped, twin.journal_last_msg_seq) == (55, 5, 60)
    assert appended == list(range(6, 61))


def test_a_journal_writer_that_refuses_drops_the_packet_and_the_error_comes_back(tmp_path: Path) -> None:
    # The writer's own refusals through the C entry: a closed writer, and a msg_seq the writer
    # holds that the plan did not know of (SequenceError). The packet is dropped, its runs
    # booked, the plan's bookkeeping counts them (as take() before a failing append_batch did).
    writer = JournalWriter(tmp_path, JournalConfig(fsync=FsyncPolicy.NONE))
    writer.append_batch(1, 1, 1, range(1, 11), [b"x"] * 10)
    with rig() as r:
        r.pump = _pump.Pump(
            r.engine.run_function(), None, writer.appender, CHANNEL.encode(), 3, 2, 1, MAX_PACKET
        )
        r.send(*(_message(seq) for seq in range(1, 4)))
        pumped = r.run(journal=True, deadline_s=0.2, journal_upto=0)
        assert r.packets(timeout_ms=200) == []
        assert pumped.stop == PumpStop.ERROR and isinstance(pumped.error, SequenceError)
        assert (pumped.messages, pumped.journaled, pumped.journal_last_msg_seq) == (3, 3, 3)
        writer.close()
        r.send(*(_message(seq) for seq in range(4, 7)))
        pumped = r.run(journal=True, deadline_s=0.2, expect=4, msg_seq=11, journal_upto=10)
        assert r.packets(timeout_ms=200) == []
    assert pumped.stop == PumpStop.ERROR and isinstance(pumped.error, JournalClosedError)
    assert (pumped.first_msg_seq, pumped.messages, pumped.journaled) == (11, 3, 3)
    assert [r.msg_seq for r in JournalReader(tmp_path).read()] == list(range(1, 11))


def test_the_pump_refuses_bad_arguments() -> None:
    engine = engine_for_format("feedha-fix")
    with pytest.raises(TypeError):
        _pump.Pump(42, None, None, b"T", 1, 1, 1, MAX_PACKET)
    with pytest.raises(ValueError, match="out of range"):
        _pump.Pump(engine.run_function(), None, None, b"T", 70_000, 1, 1, MAX_PACKET)
    with pytest.raises(ValueError, match="no room"):
        _pump.Pump(engine.run_function(), None, None, b"T", 1, 1, 1, wire.HEADER_SIZE)
    with pytest.raises(TypeError, match="Appender"):  # a journal is the writer's live tail, nothing else
        _pump.Pump(engine.run_function(), None, print, b"T", 1, 1, 1, MAX_PACKET)
    pump = _pump.Pump(engine.run_function(), None, None, b"T", 1, 1, 1, MAX_PACKET)
    with pytest.raises(ValueError, match="socket is missing"):
        pump.run(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, False, 10, 10)
    with pytest.raises(ValueError, match="mode"):
        pump.run(1, 1, 0, 1, 0, 0, 0, 0, 1, 1, 7, False, 10, 10)
    report = (1, 0, 10, b"", b"", b"", 1, 0, 0, 0)
    with pytest.raises(ValueError, match="only an active"):
        pump.run(1, 1, 0, 0, 0, 0, 0, 0, 1, 1, int(PumpMode.HOLD), False, 10, 10, 0, report)
    with pytest.raises(ValueError, match="interval"):
        pump.run(1, 1, 0, 1, 0, 0, 0, 0, 1, 1, 0, False, 10, 10, 0, (0, *report[1:]))
    with pytest.raises(TypeError):
        pump.run(1, 1, 0, 1, 0, 0, 0, 0, 1, 1, 0, False, 10, 10, 0, ("not", "a", "report"))
    assert _pump.zmq_version_info() == zmq.zmq_version_info()


def test_send_packet_sends_topic_and_packet_as_one_message_and_refuses_what_is_not_a_send() -> None:
    with rig() as r:
        packet = bytes(range(256)) * 4
        _pump.send_packet(r.line.underlying, CHANNEL.encode(), packet)
        assert r.tap.poll(5000)
        assert r.tap.recv_multipart() == [CHANNEL.encode(), packet]  # two parts, as pyzmq's two sends
        for bad in (
            (r.line.underlying, "topic", packet),
            (r.line.underlying, CHANNEL.encode()),
            ("1", b"", b""),
        ):
            with pytest.raises(TypeError, match="send_packet"):
                _pump.send_packet(*bad)
        with pytest.raises(ValueError, match="no socket"):
            _pump.send_packet(0, CHANNEL.encode(), packet)
        assert not r.tap.poll(50)  # nothing half sent


def test_an_adapter_s_lines_send_through_the_extension_and_count_the_same_bytes() -> None:
    from feedha.adapter.config import AdapterConfig
    from feedha.adapter.line import LineSocket
    from feedha.adapter.source_pump import native_send
    from feedha.adapter.zap import DataPlaneGuard

    assert native_send() is _pump.send_packet
    config = AdapterConfig(
        channel=CHANNEL, channel_number=3, adapter=1, source_endpoint="tcp://127.0.0.1:1",
        line_endpoint="tcp://127.0.0.1:*", sync_endpoint="tcp://127.0.0.1:2", source_stream=STREAM.decode(),
        source_stream_number=1,
    )  # fmt: skip
    line = LineSocket(config, DataPlaneGuard(adapter=1, keys=None, sync_keys=None))
    sent: list[tuple[int, bytes, bytes]] = []
    line.send_natively(lambda socket, topic, packet: sent.append((socket, topic, packet)))
    line.send(b"before it is open")  # nowhere: not bound
    line.open()
    try:
        line.send(b"one packet")
        assert sent == [(line.raw_socket().underlying, CHANNEL.encode(), b"one packet")]
        assert line.bytes_sent == len(b"one packet")
    finally:
        line.close()
