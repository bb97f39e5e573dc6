"""Micro-benchmark of the arbitrating client: CPU µs per delivered message.

``python -m feedha.bench.micro_client [--messages N] [--repeat R] [--rate R] [--cases ...]``
prints one JSON object. By default packets are what a channel carries at high
rates: ~8 KiB packets of ~56 blocks whose payloads are real ``MarketUpdate``
encodings (1-3 entries); ``--per-packet N`` puts N messages in each packet instead
(1 is the shape at 10k msg/s, where each packet carries one message). They go
on two lines (active + backup, the same msg_seq and source identities; the
backup's payloads differ, as each adapter stamps its own publish time), the
backup lagging a few packets behind. Cases (best
of ``--repeat``, µs of thread CPU per delivered message):

* ``arbiter``: ``ChannelArbiter.on_packet`` in-process, both lines
  interleaved, counting ``Delivery`` events and reading ``source_seq`` as the
  bench client does.
* ``arbiter_identical``: the backup's packets byte-identical to the active's
  (the known-copy shortcut); ``arbiter_misaligned``: the backup cuts its
  packets at other boundaries.
* ``subscriber``: two PUB sockets → ``Subscriber`` over loopback TCP; the
  packets are queued first, then the ``poll()`` loop is timed (a backlog).
  ``async_subscriber``: the same through ``AsyncSubscriber`` on an asyncio loop.
* ``paced``: a publisher process offers ``--rate`` msg/s on the two lines
  (full packets in bursts at least 1 ms apart, as the pipeline's were while its
  source batched on a 1 ms tick; with ``--per-packet`` it sends each packet
  when due, with no 1 ms floor, as the pipeline does now);
  the subscriber's CPU per message and share of a core (steady state).
  ``paced_async``: the same through ``AsyncSubscriber``. ``paced_thread_facade``:
  a blocking ``poll()`` that runs ``AsyncSubscriber.poll`` on a private event
  loop in a thread (the shape client_lib/subscriber.py's docstring weighs and
  turns down). ``paced_bare``: the same packets received by two bare SUB
  sockets and a ``zmq.Poller`` (wake-ups and receives only: the floor under
  ``paced``).
* ``bare_packets``: the same packets drained from two bare SUB sockets
  (``recv_multipart`` only): the floor under ``subscriber``.
* ``bare_messages``: the ceiling's shape, one 100-byte ZeroMQ message per
  message on a bare PUB→SUB pair, ``recv`` only (what ``bench throughput``
  divides by).

The subscriber cases count the CPU of every Python thread of the process
(whichever thread runs the loop), not ZeroMQ's I/O threads.
"""

from __future__ import annotations

import argparse
import json
import random
import select
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from feedha.client import ArbiterStats

MESSAGES: Final = 200_000
RATE: Final = 150_000.0
TICK_S: Final = 0.001  # the publisher's least sleep between bursts
CASES: Final = (
    "arbiter",
    "arbiter_identical",
    "arbiter_misaligned",
    "subscriber",
    "async_subscriber",
    "paced",
    "paced_async",
    "paced_thread_facade",
    "paced_bare",
    "bare_packets",
    "bare_messages",
)
REPEAT: Final = 5
PACKET_BYTES: Final = 8192
BACKUP_LAG: Final = 3  # packets
CHANNEL: Final = 1
TOPIC: Final = b"EQ"


def _payloads(count: int, seed: int = 1, *, adapter: int = 1) -> list[bytes]:
    """Encoded MarketUpdates; each adapter stamps its own publish time, as real ones do."""
    from feedha.proto import market_pb2

    rng = random.Random(seed)
    out = []
    for i in range(count):
        update = market_pb2.MarketUpdate(
            symbol=f"S{rng.randrange(200):03d}",
            event_time_ns=1_700_000_000_000_000_000 + i * 1000,
            publish_time_ns=1_700_000_000_000_000_000 + i * 1000 + 500 + adapter,
        )
        for _ in range(rng.randint(1, 3)):
            update.entries.add(
                type=rng.randint(1, 3), price=rng.uniform(10, 500), size=rng.randint(1, 50) * 100
            )
        state = update.state
        state.volume, state.trade_count = rng.randrange(10**7), rng.randrange(10**5)
        state.high = state.low = state.last = state.vwap = state.bid = state.ask = rng.uniform(10, 500)
        state.notional = rng.uniform(1e6, 1e9)
        out.append(update.SerializeToString())
    return out


def _packets(payloads: Sequence[bytes], *, adapter: int, cuts: int = 0, per_packet: int = 0) -> list[bytes]:
    """Cut the blocks into packets of at most PACKET_BYTES (``cuts`` shifts the boundaries).

    ``per_packet``: at most this many blocks a packet (0: as many as fit).
    """
    from feedha.proto.wire import PacketBuilder

    builder = PacketBuilder(PACKET_BYTES - cuts * 97)
    out = []
    send_ns = 1_700_000_000_000_000_000 + adapter
    for seq, payload in enumerate(payloads, start=1):
        if builder.count and (not builder.fits(len(payload)) or builder.count == per_packet):
            out.append(builder.build(channel=CHANNEL, adapter=adapter, term=1, send_time_ns=send_ns))
        builder.add(seq, 1, 1000 + seq, payload)
    out.append(builder.build(channel=CHANNEL, adapter=adapter, term=1, send_time_ns=send_ns))
    return out


def _interleave(active: list[bytes], backup: list[bytes]) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    for i in range(max(len(active), len(backup) + BACKUP_LAG)):
        if i < len(active):
            out.append((0, active[i]))
        if 0 <= i - BACKUP_LAG < len(backup):
            out.append((1, backup[i - BACKUP_LAG]))
    return out


def _best(run: Callable[[], float], repeat: int) -> float:
    return min(run() for _ in range(repeat))


def _arbiter_case(stream: list[tuple[int, bytes]], messages: int) -> Callable[[], float]:
    from feedha.client import ArbiterConfig, ChannelArbiter, Delivery

    def run() -> float:
        arbiter = ChannelArbiter(ArbiterConfig(channel=CHANNEL), lines=2)
        on_packet = arbiter.on_packet
        delivered = last = 0
        started = time.thread_time()
        for line, packet in stream:
            for event in on_packet(line, packet, now=0.0):
                if type(event) is Delivery:
                    delivered += 1
                    last = event.source_seq
        elapsed = time.thread_time() - started
        assert delivered == messages and last == 1000 + messages, (delivered, last)
        return elapsed * 1e6 / messages

    return run


def _client_cpu() -> float:
    """CPU seconds of every Python thread of this process (ZeroMQ's I/O threads are not among them)."""
    total = 0.0
    for thread in threading.enumerate():
        if thread.ident is not None:
            total += time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    return total


def _wait_joined(subs: Sequence[Any], pubs: Sequence[Any], probe: bytes) -> None:
    """Send probes until every SUB has one (no slow-joiner loss), then drop the probes."""
    import zmq

    pending = set(range(len(subs)))
    deadline = time.monotonic() + 10
    while pending and time.monotonic() < deadline:
        for pub in pubs:
            pub.send_multipart((TOPIC, probe))
        time.sleep(0.01)
        for index in list(pending):
            try:
                subs[index].recv_multipart(zmq.NOBLOCK)
                pending.discard(index)
            except zmq.Again:
                pass
    time.sleep(0.05)
    for sub in subs:
        while True:
            try:
                sub.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break


def _preload(pubs: Sequence[Any], stream: list[tuple[int, bytes]], settle_s: float) -> None:
    for line, packet in stream:
        pubs[line].send_multipart((TOPIC, packet))
    time.sleep(settle_s)  # the I/O threads move everything into the SUB queues


def _beat() -> bytes:
    """A heartbeat at msg_seq 1: it delivers nothing and raises no gap."""
    from feedha.proto.wire import encode_packet

    return encode_packet(channel=CHANNEL, adapter=9, term=1, first_seq=1, blocks=[], send_time_ns=0)


def _joined(stats: dict[str, ArbiterStats]) -> bool:
    return min(line.heartbeats for line in stats[TOPIC.decode()].lines) > 0


def _receive(poll: Callable[[float], list[Any]], messages: int) -> int:
    """Poll until ``messages`` deliveries; returns the last one's source_seq (read as a client would)."""
    from feedha.client import Delivery

    delivered = last = 0
    while delivered < messages:
        for event in poll(1.0):
            if type(event) is Delivery:
                delivered += 1
                last = event.source_seq
    return last


async def _areceive(poll: Callable[[float], Any], messages: int) -> int:
    """:func:`_receive` on asyncio."""
    from feedha.client import Delivery

    delivered = last = 0
    while delivered < messages:
        for event in await poll(1.0):
            if type(event) is Delivery:
                delivered += 1
                last = event.source_seq
    return last


def _subscriber_case(
    stream: list[tuple[int, bytes]], messages: int, settle_s: float, *, on_asyncio: bool = False
) -> Callable[[], float]:
    import asyncio

    import zmq

    from feedha.client import AsyncSubscriber, ChannelSpec, Subscriber

    def blocking(spec: ChannelSpec, pubs: list[Any]) -> float:
        with Subscriber([spec]) as subscriber:
            while not _joined(subscriber.stats()):
                for pub in pubs:
                    pub.send_multipart((TOPIC, _beat()))
                subscriber.poll(0.01)
            _preload(pubs, stream, settle_s)
            started = _client_cpu()
            last = _receive(subscriber.poll, messages)
            elapsed = _client_cpu() - started
        assert last == 1000 + messages, last
        return elapsed

    async def on_loop(spec: ChannelSpec, pubs: list[Any]) -> float:
        async with AsyncSubscriber([spec]) as subscriber:
            while not _joined(subscriber.stats()):
                for pub in pubs:
                    pub.send_multipart((TOPIC, _beat()))
                await subscriber.poll(0.01)
            _preload(pubs, stream, settle_s)
            started = _client_cpu()
            last = await _areceive(subscriber.poll, messages)
            elapsed = _client_cpu() - started
        assert last == 1000 + messages, last
        return elapsed

    def run() -> float:
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        pubs = []
        try:
            for _ in range(2):
                pub = ctx.socket(zmq.PUB)
                pub.sndhwm, pub.linger = 0, 0
                pubs.append(pub)
            ports = [pub.bind_to_random_port("tcp://127.0.0.1") for pub in pubs]
            spec = ChannelSpec(TOPIC.decode(), CHANNEL, tuple(f"tcp://127.0.0.1:{p}" for p in ports))
            elapsed = asyncio.run(on_loop(spec, pubs)) if on_asyncio else blocking(spec, pubs)
        finally:
            for pub in pubs:
                pub.close(linger=0)
            ctx.term()
        return elapsed * 1e6 / messages

    return run


def _bare_case(stream: list[tuple[int, bytes]], messages: int, settle_s: float) -> Callable[[], float]:
    import zmq

    def run() -> float:
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        socks = []
        try:
            pubs, subs = [], []
            for _ in range(2):
                pub, sub = ctx.socket(zmq.PUB), ctx.socket(zmq.SUB)
                socks += [pub, sub]
                pub.sndhwm, sub.rcvhwm, pub.linger, sub.linger = 0, 0, 0, 0
                sub.setsockopt(zmq.SUBSCRIBE, TOPIC)
                sub.connect(f"tcp://127.0.0.1:{pub.bind_to_random_port('tcp://127.0.0.1')}")
                pubs.append(pub)
                subs.append(sub)
            _wait_joined(subs, pubs, b"probe")
            _preload(pubs, stream, settle_s)
            counts = [0, 0]
            want = [sum(1 for line, _p in stream if line == i) for i in (0, 1)]
            started = time.thread_time()
            for index, sub in enumerate(subs):
                recv = sub.recv_multipart
                for _ in range(want[index]):
                    recv()
                    counts[index] += 1
            elapsed = time.thread_time() - started
        finally:
            for sock in socks:
                sock.close(linger=0)
            ctx.term()
        return elapsed * 1e6 / messages

    return run


def _bare_messages_case(messages: int, settle_s: float) -> Callable[[], float]:
    import zmq

    payload = b"D" + b"\x00" * 99

    def run() -> float:
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        pub, sub = ctx.socket(zmq.PUB), ctx.socket(zmq.SUB)
        try:
            pub.sndhwm, sub.rcvhwm, pub.linger, sub.linger = 0, 0, 0, 0
            sub.setsockopt(zmq.SUBSCRIBE, b"")
            sub.connect(f"tcp://127.0.0.1:{pub.bind_to_random_port('tcp://127.0.0.1')}")
            while True:  # join
                pub.send(b"P")
                if sub.poll(10):
                    break
            time.sleep(0.05)
            while sub.poll(0):
                sub.recv()
            send = pub.send
            for _ in range(messages):
                send(payload)
            time.sleep(settle_s)
            recv = sub.recv
            started = time.thread_time()
            for _ in range(messages):
                recv()
            elapsed = time.thread_time() - started
        finally:
            pub.close(linger=0)
            sub.close(linger=0)
            ctx.term()
        return elapsed * 1e6 / messages

    return run


def _publisher_main(argv: Sequence[str]) -> int:
    """``python -m feedha.bench.micro_client publish``: two lines' packets, paced, for the ``paced`` case."""
    import zmq

    from feedha.proto.wire import encode_packet

    parser = argparse.ArgumentParser(prog="python -m feedha.bench.micro_client publish")
    parser.add_argument("--messages", type=int, required=True)
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--per-packet", type=int, default=0)
    args = parser.parse_args(list(argv))
    stream = _interleave(
        _packets(_payloads(args.messages, adapter=1), adapter=1, per_packet=args.per_packet),
        _packets(_payloads(args.messages, adapter=2), adapter=2, per_packet=args.per_packet),
    )
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    pubs = [ctx.socket(zmq.PUB) for _ in range(2)]
    for pub in pubs:
        pub.sndhwm, pub.linger = 0, 5000
    print(json.dumps({"ports": [pub.bind_to_random_port("tcp://127.0.0.1") for pub in pubs]}), flush=True)
    beat = encode_packet(channel=CHANNEL, adapter=9, term=1, first_seq=1, blocks=[], send_time_ns=0)
    while not select.select([sys.stdin], [], [], 0.01)[0]:  # heartbeats until the client says go
        for pub in pubs:
            pub.send_multipart((TOPIC, beat))
    sys.stdin.readline()
    # Bursts at least a tick apart (as the pipeline's packets came while its
    # source batched on a 1 ms tick), both lines at once; with --per-packet,
    # each packet when it is due (as the pipeline's come at low rates now).
    least = 0.0 if args.per_packet else TICK_S
    start = time.monotonic()
    sent = 0
    for line, packet in stream:
        if line == 0:  # the active's packet is due when its last message is
            sent += int.from_bytes(packet[20:22], "big")
            due = start + sent / args.rate
            if due > time.monotonic():
                time.sleep(max(due - time.monotonic(), least))
        pubs[line].send_multipart((TOPIC, packet))
    for pub in pubs:
        pub.close()
    ctx.term()
    return 0


class _ThreadFacade:
    """A blocking poll() over AsyncSubscriber on a private loop in a thread (the design turned down)."""

    def __init__(self, spec: Any) -> None:
        import asyncio

        from feedha.client import AsyncSubscriber

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="facade-loop", daemon=True)
        self._thread.start()

        async def make() -> AsyncSubscriber:
            return AsyncSubscriber([spec])

        self._subscriber = asyncio.run_coroutine_threadsafe(make(), self._loop).result()

    def poll(self, timeout: float) -> list[Any]:
        import asyncio

        return asyncio.run_coroutine_threadsafe(self._subscriber.poll(timeout), self._loop).result()

    def stats(self) -> dict[str, Any]:
        return self._subscriber.stats()

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._subscriber.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def _paced_case(
    messages: int, rate: float, *, shape: str = "blocking", per_packet: int = 0
) -> dict[str, float]:
    """The client at a steady offered rate: CPU per message and share of a core.

    ``shape``: ``blocking`` (Subscriber), ``asyncio`` (AsyncSubscriber),
    ``thread_facade`` (:class:`_ThreadFacade`) or ``bare`` (two plain SUB
    sockets and a zmq.Poller only receive the packets: the floor, wake-ups and
    receives, no arbitration).
    """
    import asyncio
    import subprocess

    from feedha.client import AsyncSubscriber, ChannelSpec, Subscriber

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "feedha.bench.micro_client",
            "publish",
            "--messages",
            str(messages),
            "--rate",
            str(rate),
            "--per-packet",
            str(per_packet),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

    def go() -> tuple[float, float]:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        return time.monotonic(), _client_cpu()

    async def on_loop(spec: ChannelSpec) -> tuple[float, float, int]:
        async with AsyncSubscriber([spec]) as subscriber:
            while min(line.packets for line in subscriber.stats()[TOPIC.decode()].lines) == 0:
                await subscriber.poll(0.05)
            wall, cpu = go()
            last = await _areceive(subscriber.poll, messages)
            return time.monotonic() - wall, _client_cpu() - cpu, last

    try:
        assert proc.stdout is not None and proc.stdin is not None
        ports = json.loads(proc.stdout.readline())["ports"]
        if shape == "bare":
            return _paced_bare(proc, ports, messages, per_packet)
        spec = ChannelSpec(TOPIC.decode(), CHANNEL, tuple(f"tcp://127.0.0.1:{port}" for port in ports))
        if shape == "asyncio":
            wall, cpu, last = asyncio.run(on_loop(spec))
        else:
            subscriber: Any = _ThreadFacade(spec) if shape == "thread_facade" else Subscriber([spec])
            try:
                while min(line.packets for line in subscriber.stats()[TOPIC.decode()].lines) == 0:
                    subscriber.poll(0.05)
                wall, cpu = go()
                last = _receive(subscriber.poll, messages)
                wall, cpu = time.monotonic() - wall, _client_cpu() - cpu
            finally:
                subscriber.close()
        assert last == 1000 + messages, last
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return {
        "us_per_message": round(cpu * 1e6 / messages, 4),
        "cpu_share": round(cpu / wall, 3),
        "delivered_rate": round(messages / wall, 1),
    }


def _paced_bare(proc: Any, ports: list[int], messages: int, per_packet: int) -> dict[str, float]:
    import zmq

    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    subs = [ctx.socket(zmq.SUB) for _ in ports]
    poller = zmq.Poller()
    try:
        for sub, port in zip(subs, ports, strict=True):
            sub.rcvhwm, sub.linger = 0, 0
            sub.setsockopt(zmq.SUBSCRIBE, TOPIC)
            sub.connect(f"tcp://127.0.0.1:{port}")
            poller.register(sub, zmq.POLLIN)
        want = sum(_packets_per_line(messages, per_packet))
        for sub in subs:  # joined once a heartbeat arrives on each
            sub.recv_multipart()
        for sub in subs:
            while sub.poll(0):
                sub.recv_multipart()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        received = 0
        wall, cpu = time.monotonic(), _client_cpu()
        while received < want:
            for sub, _mask in poller.poll(1000):
                while True:
                    try:
                        frames = sub.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    received += len(frames[1]) > 40  # not a heartbeat
        wall, cpu = time.monotonic() - wall, _client_cpu() - cpu
        proc.wait(30)
    finally:
        for sub in subs:
            sub.close(linger=0)
        ctx.term()
    return {
        "us_per_message": round(cpu * 1e6 / messages, 4),
        "cpu_share": round(cpu / wall, 3),
        "delivered_rate": round(messages / wall, 1),
    }


def _packets_per_line(messages: int, per_packet: int) -> list[int]:
    return [
        len(_packets(_payloads(messages, adapter=adapter), adapter=adapter, per_packet=per_packet))
        for adapter in (1, 2)
    ]


def main(argv: Sequence[str]) -> int:
    """Run the cases and print one JSON object (µs of CPU per delivered message)."""
    if argv[:1] == ["publish"]:
        return _publisher_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m feedha.bench.micro_client", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--messages", type=int, default=MESSAGES, help="messages a case delivers (default %(default)s)"
    )
    parser.add_argument(
        "--repeat", type=int, default=REPEAT, help="runs of each case; the best is kept (default %(default)s)"
    )
    parser.add_argument("--settle", type=float, default=1.0, help="seconds to let the queues fill")
    parser.add_argument("--rate", type=float, default=RATE, help="msg/s offered in the paced case")
    parser.add_argument(
        "--per-packet",
        type=int,
        default=0,
        help="at most this many messages a packet (0: fill 8 KiB; 1: the pipeline's shape at 10k msg/s, "
        "where each message goes out when due); the paced publisher then sends each packet when due",
    )
    parser.add_argument(
        "--cases", default=",".join(CASES), help="comma-separated cases to run (default: all, %(default)s)"
    )
    args = parser.parse_args(list(argv))
    per_packet = args.per_packet
    payloads = _payloads(args.messages)
    active = _packets(payloads, adapter=1, per_packet=per_packet)
    identical = _interleave(active, _packets(payloads, adapter=2, per_packet=per_packet))
    other_payloads = _payloads(args.messages, adapter=2)
    distinct = _interleave(active, _packets(other_payloads, adapter=2, per_packet=per_packet))
    misaligned = _interleave(active, _packets(other_payloads, adapter=2, cuts=3, per_packet=per_packet))
    cases: dict[str, Callable[[], float]] = {
        "arbiter": _arbiter_case(distinct, args.messages),
        "arbiter_identical": _arbiter_case(identical, args.messages),
        "arbiter_misaligned": _arbiter_case(misaligned, args.messages),
        "subscriber": _subscriber_case(distinct, args.messages, args.settle),
        "async_subscriber": _subscriber_case(distinct, args.messages, args.settle, on_asyncio=True),
        "bare_packets": _bare_case(distinct, args.messages, args.settle),
        "bare_messages": _bare_messages_case(args.messages, args.settle),
    }
    results: dict[str, Any] = {}
    shapes = {"paced": "blocking", "paced_async": "asyncio", "paced_thread_facade": "thread_facade"}
    shapes["paced_bare"] = "bare"
    for name in args.cases.split(","):
        if name in shapes:
            results[name] = _paced_case(args.messages, args.rate, shape=shapes[name], per_packet=per_packet)
        elif name in cases:
            results[name] = round(_best(cases[name], args.repeat), 4)
        else:
            parser.error(f"unknown case {name!r}")
    print(
        json.dumps(
            {
                "unit": "us_cpu_per_message",
                "results": results,
                "params": {
                    "messages": args.messages,
                    "repeat": args.repeat,
                    "rate": args.rate,
                    "per_packet": per_packet,
                    "packets_per_line": len(active),
                    "blocks_per_packet": round(args.messages / len(active), 1),
                    "mean_payload_bytes": round(sum(map(len, payloads)) / len(payloads), 1),
                },
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
