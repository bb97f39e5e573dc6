"""The client micro-benchmark's packets, and how its cases count what they receive.

What a channel carries at high rates, written with the wire's own encoder:
two lines (active and backup) of packets of ``MarketUpdate`` payloads,
interleaved with the backup a few packets behind (:func:`interleave`); and the
receiving loops every subscriber case times (:func:`receive_all`,
:func:`areceive_all`) with the CPU they count (:func:`client_cpu`).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

PACKET_BYTES: Final = 8192
BACKUP_LAG: Final = 3  # packets
CHANNEL: Final = 1
TOPIC: Final = b"EQ"


def make_payloads(count: int, seed: int = 1, *, adapter: int = 1) -> list[bytes]:
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


def make_packets(
    payloads: Sequence[bytes], *, adapter: int, cuts: int = 0, per_packet: int = 0
) -> list[bytes]:
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


def interleave(active: list[bytes], backup: list[bytes]) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    for i in range(max(len(active), len(backup) + BACKUP_LAG)):
        if i < len(active):
            out.append((0, active[i]))
        if 0 <= i - BACKUP_LAG < len(backup):
            out.append((1, backup[i - BACKUP_LAG]))
    return out


def client_cpu() -> float:
    """CPU seconds of every Python thread of this process (ZeroMQ's I/O threads are not among them)."""
    total = 0.0
    for thread in threading.enumerate():
        if thread.ident is not None:
            total += time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    return total


def receive_all(poll: Callable[[float], list[Any]], messages: int) -> int:
    """Poll until ``messages`` deliveries; returns the last one's source_seq (read as a client would)."""
    from feedha.client import Delivery

    delivered = last = 0
    while delivered < messages:
        for event in poll(1.0):
            if type(event) is Delivery:
                delivered += 1
                last = event.source_seq
    return last


async def areceive_all(poll: Callable[[float], Any], messages: int) -> int:
    """:func:`receive_all` on asyncio."""
    from feedha.client import Delivery

    delivered = last = 0
    while delivered < messages:
        for event in await poll(1.0):
            if type(event) is Delivery:
                delivered += 1
                last = event.source_seq
    return last
