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
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from feedha.bench.micro_client_paced import paced_case, publisher_main
from feedha.bench.micro_client_packets import (
    CHANNEL,
    TOPIC,
    areceive_all,
    client_cpu,
    interleave,
    make_packets,
    make_payloads,
    receive_all,
)

if TYPE_CHECKING:
    from feedha.client import ArbiterStats

MESSAGES: Final = 200_000
RATE: Final = 150_000.0
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
            started = client_cpu()
            last = receive_all(subscriber.poll, messages)
            elapsed = client_cpu() - started
        assert last == 1000 + messages, last
        return elapsed

    async def on_loop(spec: ChannelSpec, pubs: list[Any]) -> float:
        async with AsyncSubscriber([spec]) as subscriber:
            while not _joined(subscriber.stats()):
                for pub in pubs:
                    pub.send_multipart((TOPIC, _beat()))
                await subscriber.poll(0.01)
            _preload(pubs, stream, settle_s)
            started = client_cpu()
            last = await areceive_all(subscriber.poll, messages)
            elapsed = client_cpu() - started
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


def _parser() -> argparse.ArgumentParser:
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
    return parser


def main(argv: Sequence[str]) -> int:
    """Run the cases and print one JSON object (µs of CPU per delivered message)."""
    if argv[:1] == ["publish"]:
        return publisher_main(argv[1:])
    parser = _parser()
    args = parser.parse_args(list(argv))
    per_packet = args.per_packet
    payloads = make_payloads(args.messages)
    active = make_packets(payloads, adapter=1, per_packet=per_packet)
    identical = interleave(active, make_packets(payloads, adapter=2, per_packet=per_packet))
    other_payloads = make_payloads(args.messages, adapter=2)
    distinct = interleave(active, make_packets(other_payloads, adapter=2, per_packet=per_packet))
    misaligned = interleave(active, make_packets(other_payloads, adapter=2, cuts=3, per_packet=per_packet))
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
            results[name] = paced_case(args.messages, args.rate, shape=shapes[name], per_packet=per_packet)
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
