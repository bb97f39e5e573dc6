"""The late-join drill's subscriber: keeps every symbol's state and records it at every msg_seq.

Run as ``python -m feedha.drills.state_client``. With ``--image`` it joins
late: it fetches the channel's image from a replay service first (every
symbol's state at msg_seq N) and subscribes from N + 1; without it, it is
the reference that was there from the start. Either way it keeps a map of
symbol -> state (each delivery carries its symbol's whole state; at a
``SessionStarted`` every symbol's daily fields start again, as the adapters
do) and, after every msg_seq, an order-independent digest of the whole map
(the sum of per-symbol BLAKE2b-64). On SIGTERM it writes ``msg_seq, digest``
pairs (little-endian u64 each) to ``--out`` and prints a ``summary``; the
drill compares a joiner's digests with the reference's at every msg_seq both
have. JSON lines on stdout: ``ready``, ``progress``, ``summary``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from array import array
from collections.abc import Sequence
from dataclasses import asdict
from hashlib import blake2b
from typing import Any, Final

from feedha.client import (
    ChannelSpec,
    Delivery,
    ReplayClient,
    SessionEnded,
    SessionStarted,
    Subscriber,
    SubscriberConfig,
)
from feedha.proto import market_pb2

MASK: Final = (1 << 64) - 1
IMAGE_WAIT_S: Final = 20.0


def _hash(symbol: str, state: bytes) -> int:
    return int.from_bytes(blake2b(symbol.encode() + b"\x00" + state, digest_size=8).digest(), "little")


class StateBook:
    """Every symbol's state and the digest of them all, kept as the deliveries come (pure)."""

    def __init__(self) -> None:
        self.states: dict[str, bytes] = {}
        self._hashes: dict[str, int] = {}
        self.digest = 0

    def set(self, symbol: str, state: market_pb2.SymbolState) -> None:
        data = state.SerializeToString(deterministic=True)
        new = _hash(symbol, data)
        self.digest = (self.digest - self._hashes.get(symbol, 0) + new) & MASK
        self.states[symbol] = data
        self._hashes[symbol] = new

    def roll(self) -> None:
        """A new session: daily fields start again; last, bid and ask carry over."""
        for symbol, data in list(self.states.items()):
            old = market_pb2.SymbolState.FromString(data)
            self.set(symbol, market_pb2.SymbolState(last=old.last, bid=old.bid, ask=old.ask))


def _emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def _image(replay: ReplayClient, number: int) -> Any:
    deadline = time.monotonic() + IMAGE_WAIT_S
    while time.monotonic() < deadline:
        image = replay.image(number)
        if image is not None:
            return image
        time.sleep(0.2)
    return None


class _Recorder:
    """The symbols' state as delivered, and its digest at every msg_seq (and every session's start)."""

    def __init__(self) -> None:
        self.book = StateBook()
        self.records = array("Q")
        self.sessions: list[dict[str, int]] = []
        self.delivered = 0
        self.last = 0
        self.holes = 0

    def start_from(self, image: Any) -> None:
        """Begin at ``image`` (the channel's image: every symbol's state at one msg_seq)."""
        for symbol, state in image.symbols.items():
            self.book.set(symbol, state)
        self.last = image.msg_seq
        self.records.extend((image.msg_seq, self.book.digest))

    def on_event(self, event: object) -> None:
        seq = None
        if isinstance(event, Delivery):
            self.book.set(event.update.symbol, event.update.state)
            self.delivered += 1
            seq = event.msg_seq
        elif isinstance(event, SessionEnded):
            self.sessions.append({"ended": event.session, "msg_seq": event.msg_seq})
        elif isinstance(event, SessionStarted):
            self.book.roll()
            seq = event.first_msg_seq - 1  # the state right after the end-of-session block
        if seq is not None:
            self.holes += seq - self.last - 1 if seq > self.last + 1 else 0
            self.last = max(self.last, seq)
            self.records.extend((seq, self.book.digest))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m feedha.drills.state_client", description=__doc__)
    parser.add_argument("--channel", required=True, help="NAME=NUMBER")
    parser.add_argument("--line", action="append", required=True, help="an ENDPOINT of a line (repeatable)")
    parser.add_argument("--replay", action="append", default=[], help="an ENDPOINT of a replay service")
    parser.add_argument("--image", action="store_true", help="join late: start from the channel's image")
    parser.add_argument("--out", required=True, help="file for the (msg_seq, digest) pairs")
    parser.add_argument("--loss-timeout", type=float, default=3.0)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    name, _sep, number_text = args.channel.partition("=")
    number = int(number_text)
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    replay = ReplayClient({number: args.replay}) if args.replay else None
    recorder = _Recorder()
    image = None
    if args.image:
        assert replay is not None, "--image needs --replay"
        image = _image(replay, number)
        if image is None:
            _emit("summary", error="no replay service had an image")
            return 1
        recorder.start_from(image)
    image_at = None if image is None else image.msg_seq
    spec = ChannelSpec(name, number, tuple(args.line), start_seq=None if image_at is None else image_at + 1)
    ready = False
    next_progress = time.monotonic() + 0.5
    config = SubscriberConfig(loss_timeout=args.loss_timeout)
    with Subscriber([spec], config, on_retransmission_needed=replay) as subscriber:
        while not stopping:
            for event in subscriber.poll(0.05):
                recorder.on_event(event)
            now = time.monotonic()
            if not ready and (subscriber.stats()[name].packets > 0):
                ready = True
                _emit("ready", image_msg_seq=image_at)
            if now >= next_progress:
                next_progress = now + 0.5
                _emit("progress", delivered=recorder.delivered, last_msg_seq=recorder.last)
        stats = subscriber.stats()[name]
    if replay is not None:
        replay.close()
    with open(args.out, "wb") as out:
        recorder.records.tofile(out)
    _emit(
        "summary",
        delivered=recorder.delivered,
        last_msg_seq=recorder.last,
        holes=recorder.holes,
        image_msg_seq=image_at,
        image_symbols=0 if image is None else len(image.symbols),
        symbols=len(recorder.book.states),
        sessions=recorder.sessions,
        arbiter=asdict(stats),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
