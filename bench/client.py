"""The bench client: one arbitrating subscriber that counts, a child process of the pipeline benchmarks.

``python -m feedha.bench.client --channel NAME --channel-number N --line URL...``
joins every line of a channel with :class:`feedha.client.Subscriber` (so it
arbitrates as a real subscriber does), counts what it delivers, optionally
decodes and times every delivery, and prints JSON events on stdout:
``ready`` once the first line delivered a packet, ``progress`` every 0.1 s,
and a ``summary`` on SIGTERM. :func:`feedha.bench.pipeline.run_pipeline`
starts it.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from feedha.runtime import settle_heap

SYMBOLS: Final = 200  # the symbols the pipeline's source generates (feedha.bench.pipeline.SYMBOLS)
PROGRESS_S: Final = 0.1


def _emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def client_parser() -> argparse.ArgumentParser:
    """The options of ``python -m feedha.bench.client``."""
    parser = argparse.ArgumentParser(prog="python -m feedha.bench.client")
    parser.add_argument("--channel", required=True)
    parser.add_argument("--channel-number", type=int, required=True)
    parser.add_argument("--line", action="append", required=True)
    parser.add_argument(
        "--keep-symbols", type=int, default=0, help="decode and keep only the first K symbols"
    )
    parser.add_argument("--symbols", type=int, default=SYMBOLS, help="symbols the source generates")
    parser.add_argument(
        "--latency",
        action="store_true",
        help="time each message: its event time (read from the payload) -> delivery",
    )
    parser.add_argument(
        "--server-key", action="append", default=[], help="per --line, the adapter's CURVE public key (Z85)"
    )
    parser.add_argument("--curve-key", help="this client's CURVE key pair file (with --server-key)")
    return parser


class _Tally:
    """What the client counted of its deliveries (the summary's figures) and the latencies it kept."""

    def __init__(self, keep: frozenset[str] | None, latency: bool) -> None:
        self.keep, self.latency = keep, latency
        self.delivered = self.kept = self.duplicates = self.out_of_order = 0
        self.last_source_seq = 0
        self.first_wall = self.last_wall = 0.0
        self.latencies = array("q")
        # Per hop, from the packet's send time (the adapter's publish): source -> adapter publish
        # (the source's batching, hop 1, the adapter) and adapter publish -> delivery (hop 2, the client).
        self.to_publish, self.from_publish = array("q"), array("q")

    def on_events(self, events: list[Any], now_ns: int, delivery: Any) -> None:
        """Count one poll's events (its deliveries all received at ``now_ns``)."""
        # Strategy: the counters are locals for the loop, stored once a poll (a poll returns
        # many deliveries at high rates; the attribute stores stay out of the per-message path).
        delivered, kept, duplicates, out_of_order = (
            self.delivered,
            self.kept,
            self.duplicates,
            self.out_of_order,
        )
        last_source_seq, keep, latency = self.last_source_seq, self.keep, self.latency
        for event in events:
            if type(event) is not delivery:
                continue
            delivered += 1
            seq = event.source_seq
            if seq <= last_source_seq:
                duplicates += seq == last_source_seq
                out_of_order += seq < last_source_seq
            else:
                last_source_seq = seq
            if keep is not None and event.update.symbol not in keep:  # decodes the payload
                continue
            if latency:
                # The one field a latency probe reads (not a whole decode), as the
                # bare model's client reads its stamp: like work for like.
                event_ns, sent_ns = event.event_time_ns, event.send_time_ns
                self.latencies.append(now_ns - event_ns)
                self.to_publish.append(sent_ns - event_ns)
                self.from_publish.append(now_ns - sent_ns)
            kept += 1
        self.delivered, self.kept, self.duplicates, self.out_of_order = (
            delivered,
            kept,
            duplicates,
            out_of_order,
        )
        self.last_source_seq = last_source_seq
        if not self.first_wall:
            self.first_wall = now_ns / 1e9
        self.last_wall = now_ns / 1e9

    def summary(self, stats: Any) -> dict[str, Any]:
        """The summary's figures, with the arbiter's counters (``stats``)."""
        summary: dict[str, Any] = {
            "delivered": self.delivered,
            "kept": self.kept,
            "duplicates": self.duplicates,
            "out_of_order": self.out_of_order,
            "last_source_seq": self.last_source_seq,
            "first_wall": self.first_wall,
            "last_wall": self.last_wall,
            "arbiter_lost": stats.lost,
            "arbiter_gaps": stats.gaps,
            "conflicts": stats.conflicts,
        }
        if self.latency:
            from feedha.bench.ceiling import latency_summary

            latencies = self.latencies
            summary["latency_us"] = latency_summary(latencies)
            summary["hops_us"] = {
                "source_to_publish": latency_summary(self.to_publish),
                "publish_to_delivery": latency_summary(self.from_publish),
            }
            # Where the worst ones fell (index in delivery order, µs): a start-up
            # effect and a stall in the middle look different.
            worst = sorted(range(len(latencies)), key=latencies.__getitem__)[-5:]
            summary["worst_latency_us"] = [[index, round(latencies[index] / 1000, 1)] for index in worst]
        return summary


def _config(args: argparse.Namespace) -> Any:
    # The subscriber's settings: its CURVE key pair with --curve-key.
    from feedha.client import SubscriberConfig

    if not args.curve_key:
        return SubscriberConfig()
    from feedha.adapter.zap import load_keys

    keys = load_keys(Path(args.curve_key))
    return SubscriberConfig(curve_public=keys.public.decode(), curve_secret=keys.secret.decode())


def client_main(argv: Sequence[str]) -> int:
    """``python -m feedha.bench.client``: subscribe, arbitrate, count; summary on SIGTERM.

    Prints ``ready`` once a packet arrived, ``progress`` every 0.1 s, and a
    ``summary`` (delivered, kept, unique/duplicates/out-of-order per the block
    headers, first/last delivery wall time, arbiter counters, latencies) on SIGTERM.
    """
    from feedha.client import ChannelSpec, Delivery, Subscriber
    from feedha.plain_source import symbol_names

    args = client_parser().parse_args(list(argv))
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    keep = frozenset(symbol_names(args.symbols)[: args.keep_symbols]) if args.keep_symbols else None
    spec = ChannelSpec(
        args.channel, args.channel_number, tuple(args.line), server_keys=tuple(args.server_key)
    )
    tally = _Tally(keep, args.latency)
    ready = False
    next_progress = time.monotonic() + PROGRESS_S
    time_ns = time.time_ns
    with Subscriber([spec], _config(args)) as subscriber:
        settle_heap()  # as the adapters do (feedha.runtime): collections walk what comes after
        while not stopping:
            events = subscriber.poll(0.05)
            if events:
                tally.on_events(events, time_ns(), Delivery)
            now = time.monotonic()
            # Ready once the first line (the starting active's) has delivered a
            # packet: its subscription is live, so nothing the source sends from
            # now on can fall into a slow-joiner hole on every line.
            if not ready and subscriber.stats()[args.channel].lines[0].packets > 0:
                ready = True
                _emit("ready")
            if now >= next_progress:
                next_progress = now + PROGRESS_S
                _emit("progress", delivered=tally.delivered, last_wall=tally.last_wall)
        stats = subscriber.stats()[args.channel]
    _emit("summary", **tally.summary(stats))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m feedha.bench.client ...``: the bench client process."""
    return client_main(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
