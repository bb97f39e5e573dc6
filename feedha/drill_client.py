"""The drills' subscriber: the client library plus independent checks of what it delivers.

Run as ``python -m feedha.drill_client``; prints JSON lines on stdout: one
``ready`` once a packet arrived, ``progress`` twice a second, and a
``summary`` when it gets SIGTERM. The checks here do not trust the arbiter:
they verify from the deliveries themselves that msg_seq grows by one, that
each source stream's source_seq grows without repeats, and they time the
pauses between deliveries (the failover switch gap).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from client_lib import ChannelSpec, Delivery, Subscriber, SubscriberConfig

GAP_RECORD_MS = 20.0
GAPS_KEPT = 64


class DeliveryChecker:
    """Independent accounting of a delivery stream (pure; fed deliveries and times)."""

    def __init__(self) -> None:
        self.delivered = 0
        self.duplicates = 0
        self.out_of_order = 0
        self.last_msg_seq: int | None = None
        self.seen: dict[int, set[int]] = {}
        self.last_source_seq: dict[int, int] = {}
        self.last_time: float | None = None
        self.gaps: list[tuple[float, float]] = []  # (start wall time, pause in ms)

    def on_delivery(self, msg_seq: int, source_stream: int, source_seq: int, wall: float) -> None:
        self.delivered += 1
        if self.last_msg_seq is not None and msg_seq <= self.last_msg_seq:
            self.out_of_order += 1
        self.last_msg_seq = msg_seq if self.last_msg_seq is None else max(msg_seq, self.last_msg_seq)
        seen = self.seen.setdefault(source_stream, set())
        if source_seq in seen:
            self.duplicates += 1
        seen.add(source_seq)
        last = self.last_source_seq.get(source_stream, 0)
        if source_seq < last:
            self.out_of_order += 1
        self.last_source_seq[source_stream] = max(last, source_seq)
        if self.last_time is not None:
            pause_ms = (wall - self.last_time) * 1000.0
            if pause_ms >= GAP_RECORD_MS:
                self.gaps.append((self.last_time, pause_ms))
                if len(self.gaps) > 4 * GAPS_KEPT:
                    self.gaps = sorted(self.gaps, key=lambda g: -g[1])[:GAPS_KEPT]
        self.last_time = wall

    def summary(self) -> dict[str, Any]:
        return {
            "delivered": self.delivered,
            "duplicates": self.duplicates,
            "out_of_order": self.out_of_order,
            "streams": {
                str(stream): {"unique": len(seqs), "min": min(seqs), "max": max(seqs)}
                for stream, seqs in self.seen.items()
                if seqs
            },
            "gaps": sorted(self.gaps, key=lambda g: -g[1])[:GAPS_KEPT],
        }


def _emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m feedha.drill_client", description=__doc__)
    parser.add_argument("--channel", required=True)
    parser.add_argument("--channel-number", type=int, required=True)
    parser.add_argument("--line", action="append", required=True, help="line endpoint (repeatable)")
    parser.add_argument("--loss-timeout", type=float, default=1.0)
    args = parser.parse_args(argv)
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    checker = DeliveryChecker()
    spec = ChannelSpec(args.channel, args.channel_number, tuple(args.line))
    config = SubscriberConfig(loss_timeout=args.loss_timeout)
    ready = False
    next_progress = time.monotonic() + 0.5
    with Subscriber([spec], config) as subscriber:
        while not stopping:
            for event in subscriber.poll(0.05):
                if isinstance(event, Delivery):
                    checker.on_delivery(event.msg_seq, event.source_stream, event.source_seq, time.time())
            now = time.monotonic()
            if not ready:
                stats = subscriber.stats().get(args.channel)
                if stats is not None and stats.packets > 0:
                    ready = True
                    _emit("ready")
            if now >= next_progress:
                next_progress = now + 0.5
                _emit("progress", delivered=checker.delivered, last_msg_seq=checker.last_msg_seq)
        stats = subscriber.stats()[args.channel]
    _emit("summary", **checker.summary(), arbiter=asdict(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
