"""The drills' subscriber: the client library plus independent checks of what it delivers.

Run as ``python -m feedha.drills.client``; prints JSON lines on stdout: one
``ready`` once a packet arrived, ``progress`` twice a second, and a
``summary`` when it gets SIGTERM. The checks here do not trust the arbiter:
they verify from the deliveries themselves that msg_seq grows by one, that
each source stream's source_seq grows without repeats, and they time the
pauses between deliveries (the failover switch gap).

With ``--delayed SECONDS`` the lines are delayed lines: the client arbitrates
the channel's delayed stream, counts the ``Purged`` events (tombstones), and
times every delivery against its event time plus the delay: ``early`` counts
deliveries sooner than that, and the overshoot's p50/p99 say how much later.
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

from feedha.client import ChannelSpec, Delivery, Purged, ReplayClient, Subscriber, SubscriberConfig
from feedha.client.books import BookKeeper
from feedha.proto import market_pb2

GAP_RECORD_MS = 20.0
GAPS_KEPT = 64
OVERSHOOT_SAMPLES = 100_000  # delayed deliveries timed at most (then every other one, and so on)
PURGED_KEPT = 1000
EARLY_KEPT = 16  # early deliveries described in the summary (the first ones)


class DelayedTiming:
    """Each delayed delivery against its event time + the delay (pure; fed times in ns)."""

    def __init__(self, delay_ns: int) -> None:
        self.delay_ns = delay_ns
        self.early = 0
        self.samples: list[int] = []  # overshoot, ns
        self._stride, self._seen = 1, 0
        self.purged: list[int] = []
        self.tombstones = 0
        self.early_examples: list[dict[str, int]] = []

    def on_delivery(self, event_time_ns: int, now_ns: int, *, msg_seq: int = 0, line: int = 0,
                    send_time_ns: int = 0) -> None:  # fmt: skip
        due = event_time_ns + self.delay_ns
        overshoot = now_ns - due
        if overshoot < 0:
            self.early += 1
            if len(self.early_examples) < EARLY_KEPT:  # what an auditor needs to place it
                self.early_examples.append({
                    "msg_seq": msg_seq, "line": line, "early_ns": -overshoot,
                    "sent_after_due_ns": send_time_ns - due,
                })  # fmt: skip
        self._seen += 1
        if self._seen % self._stride == 0:
            self.samples.append(overshoot)
            if len(self.samples) >= OVERSHOOT_SAMPLES:  # bounded: keep every other sample
                self.samples = self.samples[::2]
                self._stride *= 2

    def on_purged(self, msg_seq: int) -> None:
        self.tombstones += 1
        if len(self.purged) < PURGED_KEPT:
            self.purged.append(msg_seq)

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.samples)

        def pick(q: float) -> float:
            return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e6, 1) if ordered else 0.0

        return {
            "tombstones": self.tombstones,
            "purged_msg_seqs": self.purged,
            "early": self.early,
            "early_examples": self.early_examples,
            "overshoot_ms_p50": pick(0.50),
            "overshoot_ms_p99": pick(0.99),
            "overshoot_ms_max": round(ordered[-1] / 1e6, 1) if ordered else 0.0,
        }


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
        gaps = sorted(self.gaps, key=lambda g: -g[1])[:GAPS_KEPT]
        return {
            "delivered": self.delivered,
            "unique": sum(len(seqs) for seqs in self.seen.values()),
            "max_pause_ms": gaps[0][1] if gaps else 0.0,
            "duplicates": self.duplicates,
            "out_of_order": self.out_of_order,
            "streams": {
                str(stream): {"unique": len(seqs), "min": min(seqs), "max": max(seqs)}
                for stream, seqs in self.seen.items()
                if seqs
            },
            "gaps": gaps,
        }


class StateKeeper:
    """Each symbol's last state on a channel without books (``feedha-fix``: quotes and trades)."""

    def __init__(self) -> None:
        self.states: dict[str, dict[str, float | int]] = {}

    def observe(self, update: market_pb2.MarketUpdate) -> None:
        """Keep the state a delivered message carries for its one symbol (book formats: nothing)."""
        if not update.symbol or update.state.HasField("book"):
            return
        state = update.state
        self.states[update.symbol] = {name: getattr(state, name) for name in STATE_FIELDS}


STATE_FIELDS = ("volume", "last", "high", "low", "vwap", "trade_count", "bid", "ask")


def book_summary(keeper: BookKeeper, depth: int, states: StateKeeper | None = None) -> dict[str, Any]:
    """Every symbol's final book (best first, ``depth`` levels a side) and session values; a
    channel without books (``states``) has each symbol's last state as its stats."""
    books = {
        symbol: {
            "bids": [[price, size] for price, size, _orders in book.bids[:depth]],
            "asks": [[price, size] for price, size, _orders in book.asks[:depth]],
        }
        for symbol, book in sorted(keeper.books.items())
    }
    names = ("volume", "last", "high", "low", "open", "close", "vwap")
    stats: dict[str, dict[str, Any]] = {
        symbol: {name: book.stats.get(name) for name in names}
        for symbol, book in sorted(keeper.books.items())
    }
    if states is not None:  # a symbol with a book keeps its book's session values
        stats.update(
            (symbol, state) for symbol, state in sorted(states.states.items()) if symbol not in stats
        )
    return {"books": books, "stats": stats}


def _emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def _pairs(values: list[str], option: str) -> list[tuple[str, str]]:
    out = []
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise SystemExit(f"{option} takes NAME=VALUE, got {value!r}")
        out.append((name, rest))
    return out


class _Channel:
    """What the client checks of one channel's deliveries, and keeps of them (books, states)."""

    def __init__(self, *, delay_s: float | None, books: int | None) -> None:
        self.checker = DeliveryChecker()
        self.delayed = delay_s is not None
        self.timing = DelayedTiming(round((delay_s or 0) * 1e9))
        self.last_symbol = "-"
        self.depth = books
        self.books = BookKeeper() if books else None
        self.states = StateKeeper() if books else None

    def on_delivery(self, event: Delivery) -> None:
        now_ns = time.time_ns()
        self.checker.on_delivery(event.msg_seq, event.source_stream, event.source_seq, now_ns / 1e9)
        if self.delayed:
            self.timing.on_delivery(
                event.event_time_ns,
                now_ns,
                msg_seq=event.msg_seq,
                line=event.line,
                send_time_ns=event.send_time_ns,
            )
        if self.books is not None and self.states is not None:
            self.books.observe(event.msg_seq, event.update)
            self.states.observe(event.update)
        if event.msg_seq % 1000 == 0:
            self.last_symbol = f"{event.update.symbol} {event.update.state.last:.2f}"

    def summary(self) -> dict[str, Any]:
        books = {}
        if self.books is not None and self.depth:
            books = book_summary(self.books, self.depth, self.states)
        return {**self.checker.summary(), **(self.timing.summary() if self.delayed else {}), **books}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m feedha.drills.client", description=__doc__)
    parser.add_argument("--channel", action="append", required=True, help="NAME=NUMBER (repeatable)")
    parser.add_argument(
        "--line", action="append", required=True, help="NAME=ENDPOINT, one per line (repeatable)"
    )
    parser.add_argument(
        "--replay", action="append", default=[], help="NAME=ENDPOINT of a replay service (repeatable)"
    )
    parser.add_argument("--loss-timeout", type=float, default=1.0)
    parser.add_argument(
        "--delayed", type=float, metavar="SECONDS", help="the lines are delayed lines of this delay"
    )
    parser.add_argument(
        "--books", type=int, metavar="DEPTH", help="keep fix44 books; the summary shows DEPTH levels a side"
    )
    return parser


def _specs(args: argparse.Namespace) -> dict[str, tuple[int, ChannelSpec]]:
    # Each channel's number and spec (its lines), by name, from --channel and --line.
    channels = {name: int(number) for name, number in _pairs(args.channel, "--channel")}
    lines: dict[str, list[str]] = {name: [] for name in channels}
    for name, endpoint in _pairs(args.line, "--line"):
        if name not in lines:
            raise SystemExit(f"--line names unknown channel {name!r}")
        lines[name].append(endpoint)
    delayed = args.delayed is not None
    return {
        name: (number, ChannelSpec(name, number, tuple(lines[name]), delayed=delayed))
        for name, number in channels.items()
    }


def _progress(watched: dict[str, _Channel], by_number: dict[int, _Channel]) -> dict[str, Any]:
    return {
        "delivered": sum(c.checker.delivered for c in by_number.values()),
        # The furthest source position delivered (every channel's streams): how far the
        # client is behind its source (feedha drill overload's backlog).
        "source_seq": max(
            (seq for c in by_number.values() for seq in c.checker.last_source_seq.values()), default=0
        ),
        "tombstones": sum(c.timing.tombstones for c in by_number.values()),
        "channels": {
            name: {"delivered": c.checker.delivered, "last": c.last_symbol} for name, c in watched.items()
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    specs = _specs(args)
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    watched = {name: _Channel(delay_s=args.delayed, books=args.books) for name in specs}
    by_number = {number: watched[name] for name, (number, _spec) in specs.items()}
    replays: dict[int, list[str]] = {}
    for name, endpoint in _pairs(args.replay, "--replay"):
        replays.setdefault(specs[name][0], []).append(endpoint)
    # Gaps no line fills in time are asked of the adapters' journals before they count as lost.
    replay = ReplayClient(replays) if replays else None
    ready = False
    next_progress = time.monotonic() + 0.5
    config = SubscriberConfig(loss_timeout=args.loss_timeout)
    keys = {name: spec.key for name, (_number, spec) in specs.items()}
    subscribed = [spec for _number, spec in specs.values()]
    with Subscriber(subscribed, config, on_retransmission_needed=replay) as subscriber:
        while not stopping:
            for event in subscriber.poll(0.05):
                if isinstance(event, Delivery):
                    by_number[event.channel].on_delivery(event)
                elif isinstance(event, Purged):
                    by_number[event.channel].timing.on_purged(event.msg_seq)
            if not ready:
                stats = subscriber.stats()
                ready = all(key in stats and stats[key].packets > 0 for key in keys.values())
                if ready:
                    _emit("ready")
            if time.monotonic() >= next_progress:
                next_progress = time.monotonic() + 0.5
                _emit("progress", **_progress(watched, by_number))
        stats = subscriber.stats()
    if replay is not None:
        replay.close()
    summary = {name: {**c.summary(), "arbiter": asdict(stats[keys[name]])} for name, c in watched.items()}
    _emit("summary", channels=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
