"""Sealing benchmark: what AES-256-GCM sealing (``proto.seal``) costs per packet and per message.

Two packet shapes, built with ``proto.wire.PacketBuilder`` from real encoded
``MarketUpdate`` messages:

- ``typical``: packets filled to the adapter's default 8,192-byte budget
  (~75 updates of ~100 bytes each), what a busy line sends;
- ``small``: one update per packet, what a quiet line sends (no batching), the
  worst case per message.

For each shape, one process seals every packet (``Sealer.seal``, as the
adapter does once per packet) and opens every sealed packet
(``Opener.open``, as each subscriber does), best of ``REPEATS`` rounds, and
checks that what it opened is what it sealed.

Figures (all of the ``seal`` group):

- ``seal_seal_cost`` and ``seal_open_cost``, in ns/packet and ns/msg; the
  ceiling is what the bare pyzmq PUB→SUB pair spends per message (1 / its
  msg/s; per packet: times the messages in a packet), so ``ratio`` is the
  sealing cost as a fraction of a bare ZeroMQ hop (lower is better);
- ``seal_rate``: msg/s one core can seal *and* open, beside the bare pair's
  msg/s (higher is better).

Ceiling, in the same run: the bare pyzmq PUB→SUB pair, unpaced, 100-byte messages.
"""

from __future__ import annotations

from typing import Any, Final

from feedha.bench.common import Figure, best_time, figure, sample_payloads
from feedha.bench.pipeline import ceiling, open_log
from feedha.proto import seal, wire

TYPICAL_PACKETS: Final = 4_000
QUICK_TYPICAL_PACKETS: Final = 400
SMALL_PACKETS: Final = 100_000
QUICK_SMALL_PACKETS: Final = 10_000
REPEATS: Final = 5
QUICK_REPEATS: Final = 3
_T0: Final = 1_700_000_000_000_000_000


def _packets(packet_count: int, per_packet: int | None) -> tuple[list[bytes], int]:
    """``packet_count`` v1 packets of ``per_packet`` updates (None: as many as fit the default budget).

    Returns:
        The packets and the number of updates they carry.
    """
    payloads = sample_payloads(256, seed=11, max_entries=1)
    builder = wire.PacketBuilder()
    packets: list[bytes] = []
    msg_seq = 1
    while len(packets) < packet_count:
        payload = payloads[msg_seq % len(payloads)]
        if not builder.fits(len(payload)) or (per_packet is not None and len(builder) >= per_packet):
            packets.append(builder.build(channel=1, adapter=1, term=1, send_time_ns=_T0 + msg_seq))
            continue
        builder.add(msg_seq, 1, msg_seq, payload)
        msg_seq += 1
    return packets, sum(wire.decode_header(packet).count for packet in packets)


def _measure(packets: list[bytes], repeats: int) -> tuple[float, float]:
    """Best seal time and best open time (s) for all ``packets``; checks the round trip."""
    key = seal.SealKey.new(1)
    sealer, opener = seal.Sealer(key), seal.Opener([key])
    sealed: list[bytes] = []

    def seal_all() -> None:
        sealed[:] = [sealer.seal(packet) for packet in packets]

    def open_all() -> None:
        opened = [opener.open(packet) for packet in sealed]
        assert len(opened) == len(packets)

    seal_s = best_time(seal_all, repeats=repeats)
    open_s = best_time(open_all, repeats=repeats)
    if [opener.open(packet) for packet in sealed] != packets:
        raise AssertionError("an opened packet differs from the packet sealed")
    return seal_s, open_s


def _shape_figures(
    shape: str,
    packets: list[bytes],
    messages: int,
    times: tuple[float, float],
    bare_rate: float,
    params: dict[str, Any],
) -> list[Figure]:
    count = len(packets)
    per_packet = messages / count
    bare_ns_per_msg = 1e9 / bare_rate if bare_rate else None
    shape_params = {
        **params,
        "packet": shape,
        "packets": count,
        "messages": messages,
        "updates_per_packet": round(per_packet, 1),
        "mean_packet_bytes": round(sum(map(len, packets)) / count, 1),
        "sealed_overhead_bytes": seal.SEALED_OVERHEAD,
    }
    bare_ns_per_packet = None if bare_ns_per_msg is None else bare_ns_per_msg * per_packet
    out: list[Figure] = []
    for name, seconds in (("seal_seal_cost", times[0]), ("seal_open_cost", times[1])):
        out.append(
            figure(
                name=name,
                value=seconds / count * 1e9,
                unit="ns/packet",
                ceiling=bare_ns_per_packet,
                params=shape_params,
            )
        )
        out.append(
            figure(
                name=name,
                value=seconds / messages * 1e9,
                unit="ns/msg",
                ceiling=bare_ns_per_msg,
                params=shape_params,
            )
        )
    out.append(
        figure(
            name="seal_rate",
            value=messages / (times[0] + times[1]),
            unit="msg/s",
            ceiling=bare_rate,
            params=shape_params,
        )
    )
    return out


def run(*, quick: bool = False) -> list[Figure]:
    """Measure sealing and opening costs for typical and small packets beside the bare pyzmq pair.

    Args:
        quick: fewer packets and rounds (under 10 s).

    Returns:
        ``seal_seal_cost`` and ``seal_open_cost`` (ns/packet and ns/msg) and
        ``seal_rate`` (msg/s sealed and opened by one core), for each packet shape.
    """
    repeats = QUICK_REPEATS if quick else REPEATS
    with open_log("seal") as log:
        bare = ceiling(quick=quick, log=log)
    params: dict[str, Any] = {
        "repeats": repeats,
        "cipher": "AES-256-GCM",
        "ceiling_lost": bare["lost"],
        "quick": quick,
        "log": log.name,
    }
    figures: list[Figure] = []
    shapes = (
        ("typical", QUICK_TYPICAL_PACKETS if quick else TYPICAL_PACKETS, None),
        ("small", QUICK_SMALL_PACKETS if quick else SMALL_PACKETS, 1),
    )
    for shape, count, per_packet in shapes:
        packets, messages = _packets(count, per_packet)
        times = _measure(packets, repeats)
        figures += _shape_figures(shape, packets, messages, times, bare["rate"], params)
    return figures
