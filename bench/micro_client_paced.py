"""The client micro-benchmark's paced cases: a publisher process offers a steady rate, the client is timed.

``paced`` (:class:`~feedha.client.Subscriber`), ``paced_async``
(``AsyncSubscriber``), ``paced_thread_facade`` (:class:`_ThreadFacade`) and
``paced_bare`` (two SUB sockets and a poller: the floor) of
``python -m feedha.bench.micro_client`` (its module docstring says what each
measures). The publisher is that module's ``publish`` command
(:func:`publisher_main`).
"""

from __future__ import annotations

import argparse
import json
import select
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, Final

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

TICK_S: Final = 0.001  # the publisher's least sleep between bursts


def publisher_main(argv: Sequence[str]) -> int:
    """``python -m feedha.bench.micro_client publish``: two lines' packets, paced, for the ``paced`` case."""
    import zmq

    from feedha.proto.wire import encode_packet

    parser = argparse.ArgumentParser(prog="python -m feedha.bench.micro_client publish")
    parser.add_argument("--messages", type=int, required=True)
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--per-packet", type=int, default=0)
    args = parser.parse_args(list(argv))
    stream = interleave(
        make_packets(make_payloads(args.messages, adapter=1), adapter=1, per_packet=args.per_packet),
        make_packets(make_payloads(args.messages, adapter=2), adapter=2, per_packet=args.per_packet),
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


def _start_publisher(messages: int, rate: float, per_packet: int) -> subprocess.Popen[str]:
    # The publisher process (python -m feedha.bench.micro_client publish): it prints its ports,
    # sends heartbeats until told "go" on its stdin, then the two lines' packets at `rate`.
    return subprocess.Popen(
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


def paced_case(
    messages: int, rate: float, *, shape: str = "blocking", per_packet: int = 0
) -> dict[str, float]:
    """The client at a steady offered rate: CPU per message and share of a core.

    ``shape``: ``blocking`` (Subscriber), ``asyncio`` (AsyncSubscriber),
    ``thread_facade`` (:class:`_ThreadFacade`) or ``bare`` (two plain SUB
    sockets and a zmq.Poller only receive the packets: the floor, wake-ups and
    receives, no arbitration).
    """
    import asyncio

    from feedha.client import AsyncSubscriber, ChannelSpec, Subscriber

    proc = _start_publisher(messages, rate, per_packet)

    def go() -> tuple[float, float]:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        return time.monotonic(), client_cpu()

    async def on_loop(spec: ChannelSpec) -> tuple[float, float, int]:
        async with AsyncSubscriber([spec]) as subscriber:
            while min(line.packets for line in subscriber.stats()[TOPIC.decode()].lines) == 0:
                await subscriber.poll(0.05)
            wall, cpu = go()
            last = await areceive_all(subscriber.poll, messages)
            return time.monotonic() - wall, client_cpu() - cpu, last

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
                last = receive_all(subscriber.poll, messages)
                wall, cpu = time.monotonic() - wall, client_cpu() - cpu
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
        wall, cpu = time.monotonic(), client_cpu()
        while received < want:
            for sub, _mask in poller.poll(1000):
                while True:
                    try:
                        frames = sub.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    received += len(frames[1]) > 40  # not a heartbeat
        wall, cpu = time.monotonic() - wall, client_cpu() - cpu
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
        len(make_packets(make_payloads(messages, adapter=adapter), adapter=adapter, per_packet=per_packet))
        for adapter in (1, 2)
    ]
