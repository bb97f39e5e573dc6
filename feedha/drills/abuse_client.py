"""The abuse drill's honest subscriber: every line of a channel, each checked for holes on its own.

Run as ``python -m feedha.drills.abuse_client --key-file FILE --channel NAME``.
With ``--witness`` it is the drill's other honest party instead: it logs in
every 0.25 s and probes every ``--health`` URL every 0.2 s, and prints the
login latencies and the probes answered in its ``summary`` (a process of its
own, so that what it measures is the servers, not the attackers' threads).
It logs in with the API key of ``FILE`` (``feedha up``'s key files), subscribes
to every symbol with a CURVE key of its own, and joins each line of the channel
with a plain ZeroMQ SUB socket (no client library: the drill checks the lines
themselves). Per line it counts the packets and blocks and every *hole*: a data
packet whose first ``msg_seq`` is not the one after the last it saw on that line
-- what a line rebinding or a dropped peer costs a subscriber. Over all lines it
keeps every ``msg_seq`` seen (a bitmap), so ``missing`` says what no line
delivered. Prints JSON lines: ``ready`` once every line delivered data,
``progress`` every second, and ``summary`` on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import zmq

from feedha.admin_client import AdminClient
from feedha.proto import wire

RCVHWM: Final = 1_000_000  # packets; the drill counts what the adapters sent, not what a queue dropped
BITMAP_GROWTH: Final = 1 << 20


@dataclass
class LineCount:
    """What one line delivered."""

    endpoint: str
    packets: int = 0
    blocks: int = 0
    heartbeats: int = 0
    holes: int = 0
    missed_blocks: int = 0  # msg_seqs skipped over by those holes
    next_seq: int = 0  # 0: nothing seen yet
    first_seq: int = 0


class SeqSet:
    """The msg_seqs seen, from the first one on, as a growing bitmap."""

    def __init__(self) -> None:
        self.base = 0
        self.bits = bytearray()
        self.highest = 0

    def add_range(self, first: int, count: int) -> None:
        if not self.base:
            self.base = first
        for seq in range(max(first, self.base), first + count):
            index = seq - self.base
            if index // 8 >= len(self.bits):
                self.bits.extend(bytes(max(BITMAP_GROWTH, index // 8 + 1 - len(self.bits))))
            self.bits[index // 8] |= 1 << (index % 8)
        self.highest = max(self.highest, first + count - 1)

    def missing(self, up_to: int) -> int:
        """msg_seqs from the first seen up to ``up_to`` that no line delivered."""
        if not self.base or up_to < self.base:
            return 0
        span = up_to - self.base + 1
        whole, rest = divmod(span, 8)
        seen = sum(bin(byte).count("1") for byte in self.bits[:whole])
        if rest and whole < len(self.bits):
            seen += bin(self.bits[whole] & ((1 << rest) - 1)).count("1")
        return span - seen


def _subscribe(args: argparse.Namespace, public: str) -> tuple[AdminClient, list[tuple[str, str]]]:
    key = json.loads(Path(args.key_file).read_text())

    async def go() -> tuple[AdminClient, list[tuple[str, str]]]:
        admin = AdminClient(key["admin"], key["key_id"], key["secret"])
        await admin.__aenter__()
        subscription = await admin.subscribe(["*"], curve_public_key=public)
        lines = [
            (line.line_endpoint, line.curve_server_key)
            for route in subscription.routes
            if route.channel_name == args.channel and not route.delayed
            for line in route.lines
        ]
        return admin, lines

    return asyncio.run(go())


def _open(
    ctx: zmq.Context[zmq.Socket[bytes]], lines: list[tuple[str, str]], keys: tuple[bytes, bytes]
) -> list[zmq.Socket[bytes]]:
    sockets = []
    for endpoint, server_key in lines:
        sock = ctx.socket(zmq.SUB)
        sock.linger = 0
        sock.rcvhwm = RCVHWM
        if server_key:
            sock.curve_publickey, sock.curve_secretkey = keys
            sock.curve_serverkey = server_key.encode()
        sock.subscribe(b"")
        sock.connect(endpoint)
        sockets.append(sock)
    return sockets


def _count(line: LineCount, seen: SeqSet, packet: bytes) -> None:
    try:
        header = wire.decode_header(packet)
    except wire.WireError:
        return
    line.packets += 1
    if header.is_heartbeat or header.count == 0:
        line.heartbeats += 1
        return
    if line.next_seq and header.first_seq > line.next_seq:
        line.holes += 1
        line.missed_blocks += header.first_seq - line.next_seq
    if not line.first_seq:
        line.first_seq = header.first_seq
    line.blocks += header.count
    line.next_seq = max(line.next_seq, header.first_seq + header.count)
    seen.add_range(header.first_seq, header.count)


def _summary(counts: list[LineCount], seen: SeqSet, started: float) -> dict[str, Any]:
    return {
        "lines": [vars(line) for line in counts],
        "line_holes": sum(line.holes for line in counts),
        "first_msg_seq": seen.base,
        "last_msg_seq": seen.highest,
        "missing": seen.missing(seen.highest),
        "unique": (seen.highest - seen.base + 1 - seen.missing(seen.highest)) if seen.base else 0,
        "seconds": round(time.monotonic() - started, 1),
    }


def _emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def _witness(args: argparse.Namespace, stop: threading.Event) -> int:
    from feedha.drills import abuse_attacks as attacks

    key = json.loads(Path(args.key_file).read_text())
    results: dict[str, Any] = {}
    prober = attacks.Prober(args.health)
    logins = attacks.HonestLogins(key["admin"], key, every_s=0.25)
    threads = [
        attacks.in_thread("health", lambda: prober.run(stop), results),
        attacks.in_thread("admin_login", lambda: logins.run(stop), results),
    ]
    _emit("ready", witness=True)
    stop.wait()
    for thread in threads:
        thread.join(15)
    # What was measured until now, even if a call is still hanging (it would count as failed).
    _emit("summary", health=prober.report(), admin_login=logins.report(), errors=results)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m feedha.drills.abuse_client", description=__doc__)
    parser.add_argument("--key-file", required=True, help="the API key file (feedha up's users/NAME.json)")
    parser.add_argument("--channel", default="", help="the channel whose lines to join")
    parser.add_argument("--witness", action="store_true", help="log in and probe instead (see above)")
    parser.add_argument("--health", action="append", default=[], help="a health listener's URL (witness)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    if args.witness:
        return _witness(args, stop)
    public, secret = zmq.curve_keypair()
    _admin, lines = _subscribe(args, public.decode())
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    sockets = _open(ctx, lines, (public, secret))
    counts = [LineCount(endpoint) for endpoint, _key in lines]
    seen = SeqSet()
    poller = zmq.Poller()
    for sock in sockets:
        poller.register(sock, zmq.POLLIN)
    started = next_progress = time.monotonic()
    ready = False
    while not stop.is_set():
        for sock, _event in poller.poll(100):
            line = counts[sockets.index(sock)]
            for _ in range(1000):
                try:
                    _topic, packet = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                _count(line, seen, packet)
        if not ready and all(line.blocks for line in counts):
            ready = True
            _emit("ready", lines=len(counts))
        if time.monotonic() >= next_progress:
            next_progress += 1.0
            _emit(
                "progress",
                last_msg_seq=seen.highest,
                line_holes=sum(line.holes for line in counts),
                blocks=[line.blocks for line in counts],
            )
    _emit("summary", **_summary(counts, seen, started))
    for sock in sockets:
        sock.close(linger=0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
