"""Real ZeroMQ PUB lines on 127.0.0.1 feeding real Subscribers (blocking and asyncio)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import zmq

from feedha.client import (
    AsyncSubscriber,
    ChannelSpec,
    ClosedError,
    Delivery,
    Event,
    GapLost,
    LineSpec,
    RetransmissionNeeded,
    Subscriber,
    SubscriberConfig,
)
from feedha.proto import market_pb2
from feedha.proto.seal import Sealer, SealKey
from feedha.proto.wire import FLAG_RETRANSMISSION, encode_packet

CHANNEL = "EQ1"
NUMBER = 3
TOPIC = CHANNEL.encode()
PER_PACKET = 20


def payload(seq: int) -> bytes:
    update = market_pb2.MarketUpdate(
        symbol=f"SYM{seq % 50}",
        event_time_ns=seq,
        publish_time_ns=seq,
        entries=[market_pb2.Entry(type=market_pb2.ENTRY_TYPE_TRADE, price=100.25, size=seq % 900 + 100)],
        state=market_pb2.SymbolState(volume=seq * 10, last=100.25, high=101.0, low=99.5, trade_count=seq),
    )
    return update.SerializeToString()


def packet(first: int, count: int, *, adapter: int = 1, flags: int = 0, channel: int = NUMBER) -> bytes:
    blocks = [(1, 5000 + seq, payload(seq)) for seq in range(first, first + count)]
    return encode_packet(
        channel=channel, adapter=adapter, term=1, first_seq=first, blocks=blocks, send_time_ns=0, flags=flags
    )


@pytest.fixture
def context() -> Iterator[zmq.Context[zmq.Socket[bytes]]]:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        yield ctx
    finally:
        ctx.destroy(linger=0)


@pytest.fixture
def lines(
    context: zmq.Context[zmq.Socket[bytes]],
) -> Iterator[Callable[[int], list[tuple[zmq.Socket[bytes], str]]]]:
    made: list[zmq.Socket[bytes]] = []

    def make(count: int) -> list[tuple[zmq.Socket[bytes], str]]:
        out = []
        for _ in range(count):
            pub = context.socket(zmq.PUB)
            made.append(pub)
            pub.setsockopt(zmq.LINGER, 0)
            pub.setsockopt(zmq.SNDHWM, 0)
            port = pub.bind_to_random_port("tcp://127.0.0.1")
            out.append((pub, f"tcp://127.0.0.1:{port}"))
        return out

    try:
        yield make
    finally:
        for pub in made:
            pub.close(linger=0)


def join(pubs: list[zmq.Socket[bytes]], stats: Callable[[], Any], poll: Callable[[float], object]) -> None:
    """Slow joiner: send heartbeat probes (next msg_seq 1) on every line until each has arrived."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for pub in pubs:
            pub.send_multipart([TOPIC, packet(1, 0, adapter=9)])
        poll(0.02)
        if all(line.heartbeats > 0 for line in stats()[CHANNEL].lines):
            return
    raise AssertionError("lines never joined")


def publish_scenario(pubs: list[zmq.Socket[bytes]], total: int) -> int:
    """Line 0 skips every 5th packet, line 1 every 7th, line 2 only every 3rd, plus garbage.

    Returns:
        how many garbage frames were sent.
    """
    garbage = 0
    for index, first in enumerate(range(1, total + 1, PER_PACKET)):
        pkt = packet(first, min(PER_PACKET, total + 1 - first))
        if index % 5 != 4:
            pubs[0].send_multipart([TOPIC, pkt])
        if index % 7 != 6 or index % 5 == 4:  # together the lines cover everything
            pubs[1].send_multipart([TOPIC, pkt])
        if len(pubs) > 2:
            if index % 3 == 0:
                pubs[2].send_multipart([TOPIC, pkt])
            pubs[2].send_multipart([TOPIC, b"\x00garbage" * index])
            pubs[2].send_multipart([TOPIC])  # wrong frame count
            pubs[2].send_multipart([TOPIC, packet(first, 1, channel=NUMBER + 1)])  # wrong channel
            pubs[2].send_multipart([CHANNEL.encode() + b"0", pkt])  # another channel's topic: ignored
            garbage += 3
    for pub in pubs:  # tail heartbeats
        pub.send_multipart([TOPIC, packet(total + 1, 0)])
    return garbage


def check(events: list[Event], total: int, stats: Any, garbage: int, line_count: int) -> None:
    seqs = [e.msg_seq for e in events if isinstance(e, Delivery)]
    assert seqs == list(range(1, total + 1))
    assert not [e for e in events if isinstance(e, GapLost)]
    channel = stats[CHANNEL]
    assert channel.delivered == total and channel.lost == 0 and channel.conflicts == 0
    assert channel.duplicates > 0 and channel.garbage == garbage
    assert channel.buffered == 0 and channel.channel == NUMBER
    assert len(channel.lines) == line_count
    assert sum(line.first_copies for line in channel.lines) == total
    first = next(e for e in events if isinstance(e, Delivery))
    assert first.update.symbol == "SYM1" and first.update.state.volume == 10


def test_blocking_subscriber_three_lines_exactly_once(lines: Any) -> None:
    total = 5000
    made = lines(3)
    pubs = [pub for pub, _ in made]
    specs = [LineSpec(endpoint, CHANNEL, NUMBER) for _, endpoint in made]
    with Subscriber(specs, SubscriberConfig(loss_timeout=5.0, fill_timeout=1.0)) as sub:
        assert "channels=EQ1, lines=3" in repr(sub)
        join(pubs, sub.stats, sub.poll)
        garbage = publish_scenario(pubs, total)
        events: list[Event] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            stats = sub.stats()[CHANNEL]
            if stats.delivered == total and stats.garbage == garbage:  # line 2 drained too
                break
            events += sub.poll(0.1)
        check(events, total, sub.stats(), garbage, 3)
        assert "delivered=5000, closed=False" in repr(sub)
    assert "closed=True" in repr(sub)
    with pytest.raises(ClosedError):
        sub.poll(0)


async def test_async_subscriber_three_lines_exactly_once(lines: Any) -> None:
    total = 5000
    made = lines(3)
    pubs = [pub for pub, _ in made]
    spec = ChannelSpec(CHANNEL, NUMBER, tuple(endpoint for _, endpoint in made))
    async with AsyncSubscriber([spec], SubscriberConfig(loss_timeout=5.0, fill_timeout=1.0)) as sub:
        deadline = time.monotonic() + 10
        while not all(line.heartbeats for line in sub.stats()[CHANNEL].lines) and time.monotonic() < deadline:
            for pub in pubs:
                pub.send_multipart([TOPIC, packet(1, 0)])
            await sub.poll(0.02)
        garbage = publish_scenario(pubs, total)
        events: list[Event] = []
        async for event in sub:
            events.append(event)
            if isinstance(event, Delivery) and event.msg_seq == total:
                break
            assert time.monotonic() < deadline + 30
        while sub.stats()[CHANNEL].garbage < garbage and time.monotonic() < deadline + 30:
            events += await sub.poll(0.1)  # line 2 may still hold garbage frames
        check(events, total, sub.stats(), garbage, 3)
    with pytest.raises(ClosedError):
        await sub.poll(0)


async def test_async_poll_cancelled_then_closed_cleanly(lines: Any) -> None:
    import asyncio

    made = lines(1)
    sub = AsyncSubscriber({CHANNEL: [made[0][1]]})
    task = asyncio.create_task(sub.poll(None))
    await asyncio.sleep(0)  # let it reach the poller (not a synchronization of data)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await sub.aclose()
    assert "closed=True" in repr(sub)


def test_gap_on_every_line_recovered_by_hook(lines: Any) -> None:
    made = lines(2)
    pubs = [pub for pub, _ in made]
    asked: list[RetransmissionNeeded] = []

    def replay(event: RetransmissionNeeded) -> list[bytes]:
        asked.append(event)
        return [packet(event.first_seq, event.count, adapter=7, flags=FLAG_RETRANSMISSION)]

    spec = ChannelSpec(CHANNEL, NUMBER, tuple(endpoint for _, endpoint in made))
    with Subscriber([spec], SubscriberConfig(fill_timeout=0.02), on_retransmission_needed=replay) as sub:
        join(pubs, sub.stats, sub.poll)
        for pub in pubs:  # both lines lose 41..60
            pub.send_multipart([TOPIC, packet(1, 40)])
            pub.send_multipart([TOPIC, packet(61, 40)])
        delivered: list[int] = []
        events: list[Event] = []
        deadline = time.monotonic() + 10
        while len(delivered) < 100 and time.monotonic() < deadline:
            batch = sub.poll(0.1)
            events += batch
            delivered += [e.msg_seq for e in batch if isinstance(e, Delivery)]
        assert delivered == list(range(1, 101))
        assert asked == [RetransmissionNeeded(NUMBER, 41, 60)]
        assert RetransmissionNeeded(NUMBER, 41, 60) in events
        stats = sub.stats()[CHANNEL]
        assert stats.retransmission_requests == 1 and stats.lost == 0
        assert stats.lines[2].first_copies == 20  # the retransmission line


def test_gap_lost_without_hook_then_delivery_moves_on(lines: Any) -> None:
    made = lines(2)
    pubs = [pub for pub, _ in made]
    with Subscriber(
        {CHANNEL: [e for _, e in made]}, SubscriberConfig(fill_timeout=0.02, loss_timeout=0.1)
    ) as sub:
        join(pubs, sub.stats, sub.poll)
        for pub in pubs:
            pub.send_multipart([TOPIC, packet(1, 10)])
            pub.send_multipart([TOPIC, packet(16, 5)])
        events: list[Event] = []
        deadline = time.monotonic() + 10
        while (
            not any(isinstance(e, Delivery) and e.msg_seq == 20 for e in events)
            and time.monotonic() < deadline
        ):
            events += sub.poll(0.1)
        kinds = [type(e).__name__ for e in events if not isinstance(e, Delivery)]
        assert kinds == ["RetransmissionNeeded", "GapLost"]
        assert GapLost(NUMBER, 11, 15) in events
        assert [e.msg_seq for e in events if isinstance(e, Delivery)] == [*range(1, 11), *range(16, 21)]
        assert sub.stats()[CHANNEL].lost == 5


def test_bad_endpoint_is_a_config_error() -> None:
    from feedha.client import ConfigError

    with pytest.raises(ConfigError) as info:
        Subscriber({CHANNEL: ["tcp://no-such-host-name-here.invalid:zz"]})
    assert info.value.parameter == "endpoint"
    with pytest.raises(ConfigError):
        Subscriber({CHANNEL: []})


def test_measure_two_line_arbitration_rate(
    lines: Any, context: zmq.Context[zmq.Socket[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    """Measure (not assert) msgs/s arbitrated + delivered from two full lines, beside raw ZeroMQ."""
    total = 200_000
    made = lines(2)
    pubs = [pub for pub, _ in made]
    packets = [packet(first, PER_PACKET * 2) for first in range(1, total + 1, PER_PACKET * 2)]
    with Subscriber({CHANNEL: [e for _, e in made]}) as sub:
        join(pubs, sub.stats, sub.poll)
        for pkt in packets:  # queue both lines fully first (HWM 0 on both ends)
            pubs[0].send_multipart([TOPIC, pkt])
            pubs[1].send_multipart([TOPIC, pkt])
        delivered = 0
        start = time.perf_counter()
        deadline = time.monotonic() + 60
        while delivered < total and time.monotonic() < deadline:
            delivered += sum(1 for e in sub.poll(1.0) if isinstance(e, Delivery))
        elapsed = time.perf_counter() - start
        stats = sub.stats()[CHANNEL]
    assert delivered == total and stats.duplicates == total
    # Raw ceiling in the same run: the same frames through one bare SUB, no arbitration.
    sub_socket = context.socket(zmq.SUB)
    sub_socket.setsockopt(zmq.LINGER, 0)
    sub_socket.setsockopt(zmq.RCVHWM, 0)
    sub_socket.setsockopt(zmq.SUBSCRIBE, TOPIC)
    sub_socket.connect(made[0][1])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not sub_socket.poll(20):
            pubs[0].send_multipart([TOPIC, b"probe"])
        while sub_socket.poll(50):
            sub_socket.recv_multipart()
        for pkt in packets:
            pubs[0].send_multipart([TOPIC, pkt])
        raw_start = time.perf_counter()
        received = 0
        while received < len(packets) and sub_socket.poll(5000):
            sub_socket.recv_multipart()
            received += 1
        raw_elapsed = time.perf_counter() - raw_start
    finally:
        sub_socket.close(linger=0)
    figures = {
        "lines": 2,
        "messages": total,
        "blocks_per_packet": PER_PACKET * 2,
        "payload_bytes": len(payload(1000)),
        "arbitrated_msgs_per_s": round(total / elapsed),
        "raw_zmq_one_line_msgs_per_s": round(received * PER_PACKET * 2 / raw_elapsed),
    }
    with capsys.disabled():
        print("\nclient_lib two-line arbitration:", json.dumps(figures))


def test_console_subscriber_prints_every_delivery_once(
    lines: Any, context: zmq.Context[zmq.Socket[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    import threading

    from feedha.client import console

    total = 200
    made = lines(2)
    pubs = [pub for pub, _ in made]
    stop = threading.Event()

    def publish() -> None:
        # Rounds of the same packets until the console is done: the first round may
        # meet a slow joiner; later rounds fill the holes (duplicates are dropped).
        deadline = time.monotonic() + 30
        while not stop.is_set() and time.monotonic() < deadline:
            for first in range(1, total + 1, PER_PACKET):
                pubs[first // PER_PACKET % 2].send_multipart([TOPIC, packet(first, PER_PACKET)])
            stop.wait(0.05)

    argv = ["--channel", f"{CHANNEL}={NUMBER}", "--json", "--count", str(total), "--start-seq", "1"]
    argv += ["--loss-timeout", "10", "--fill-timeout", "5", "--seconds", "60"]
    for _, endpoint in made:
        argv += ["--line", endpoint]
    thread = threading.Thread(target=publish)
    thread.start()
    try:
        code = console.main(argv)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert code == 0 and not thread.is_alive()
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    deliveries = [r for r in records if r["event"] == "Delivery"]
    assert [r["msg_seq"] for r in deliveries] == list(range(1, total + 1))
    assert deliveries[0]["symbol"] == "SYM1" and deliveries[0]["volume"] == 10
    summary = records[-1]
    assert summary["event"] == "Summary" and summary["delivered"] == total and summary["lost"] == 0
    assert len(summary["lines"]) == 2


def test_a_sealed_channel_delivers_what_its_keys_open_and_counts_everything_else(lines: Any) -> None:
    old, new, stranger = SealKey.new(1), SealKey.new(2), SealKey.new(3)
    ((pub, endpoint),) = lines(1)
    spec = ChannelSpec(CHANNEL, NUMBER, (endpoint,), seal_keys=(old,))
    with Subscriber([spec]) as sub:
        deadline = time.monotonic() + 10
        while sub.stats()[CHANNEL].lines[0].heartbeats == 0:  # slow joiner: sealed probes
            assert time.monotonic() < deadline, "the line never joined"
            pub.send_multipart([TOPIC, Sealer(old).seal(packet(1, 0, adapter=9))])
            sub.poll(0.02)
        sent = [
            Sealer(old).seal(packet(1, 10)),
            packet(11, 10),  # plain: anyone on a multicast segment can send it
            Sealer(stranger).seal(packet(11, 10)),  # a key this subscriber was never given
            Sealer(old).seal(packet(11, 10))[:-1] + b"\x00",  # a tampered tag
        ]
        for frame in sent:
            pub.send_multipart([TOPIC, frame])
        events: list[Event] = []
        while len([e for e in events if isinstance(e, Delivery)]) < 10 and time.monotonic() < deadline:
            events += sub.poll(0.05)
        # The rotation reaches the subscriber (a route update): packets under the new key open too.
        sub.join(ChannelSpec(CHANNEL, NUMBER, (endpoint,), seal_keys=(new,)))
        pub.send_multipart([TOPIC, Sealer(new).seal(packet(11, 10))])
        while len([e for e in events if isinstance(e, Delivery)]) < 20 and time.monotonic() < deadline:
            events += sub.poll(0.05)
        stats = sub.stats()[CHANNEL]
    assert [e.msg_seq for e in events if isinstance(e, Delivery)] == list(range(1, 21))
    assert stats.garbage == 3 and stats.lost == 0
