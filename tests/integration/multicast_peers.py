"""Two receivers of multicast lines for the sealing drill, each run in its own network namespace.

``python -m tests.integration.multicast_peers spy --interface ADDR --line EP ... --seconds S``
    joins the lines with plain ZeroMQ and no keys, as anyone on the segment
    can, and reports what it could make of the packets.
``python -m tests.integration.multicast_peers holder --admin HOST:PORT --key-file F --tls-ca F ...``
    logs in, subscribes, keeps the packet keys of that moment and never asks
    for new ones (a subscriber whose access is then revoked); it reports when
    its keys last opened a packet and how many packets they no longer open.

Both print JSON lines: ``ready`` once packets arrive, then ``summary``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import zmq

from feedha import transport
from feedha.admin_client import AdminClient, tls_from_files
from feedha.proto.seal import Opener, SealError, SealKey
from feedha.proto.wire import WireError, decode_header


def _emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def _join(lines: Sequence[str], interface: str) -> list[zmq.Socket[bytes]]:
    sockets = []
    for line in lines:
        endpoint = transport.receiving_endpoint(line, interface)
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
        sock.linger = 0
        transport.configure_socket(sock, endpoint)
        sock.subscribe(b"")
        sock.connect(endpoint)
        sockets.append(sock)
    return sockets


def _packets(sockets: list[zmq.Socket[bytes]], seconds: float) -> Any:
    poller = zmq.Poller()
    for sock in sockets:
        poller.register(sock, zmq.POLLIN)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for sock, _ in poller.poll(100):
            frames = sock.recv_multipart()
            if len(frames) == 2:
                yield frames[1]


def spy(args: argparse.Namespace) -> int:
    """Read the lines without keys: count packets, versions, and what a wrong key or a v1 parser gets."""
    stranger = Opener()
    stranger.add(SealKey.new(1))
    count, versions, parsed, opened = 0, collections.Counter[int](), 0, 0
    for packet in _packets(_join(args.line, args.interface), args.seconds):
        count += 1
        if count == 1:
            _emit("ready")
        versions[packet[2] if len(packet) > 2 else -1] += 1
        try:
            decode_header(packet)
            parsed += 1
        except WireError:
            pass
        try:
            stranger.open(packet)
            opened += 1
        except SealError:
            pass
    _emit("summary", packets=count, versions=dict(versions), parsed_as_plain=parsed, opened=opened)
    return 0


async def _subscribe(admin: str, key_id: str, secret: str, ca: str) -> tuple[list[str], list[SealKey]]:
    async with AdminClient(admin, key_id, secret, tls=tls_from_files(ca)) as client:
        subscription = await client.subscribe(["*"])
        (route,) = subscription.routes
        return [line.line_endpoint for line in route.lines], list(route.seal_keys)


def holder(args: argparse.Namespace) -> int:
    """Subscribe once, keep those keys, and report when they stop opening packets."""
    key = json.loads(open(args.key_file, encoding="utf-8").read())
    lines, keys = asyncio.run(_subscribe(args.admin, key["key_id"], key["secret"], args.tls_ca))
    opener = Opener()
    for seal_key in keys:
        opener.add(seal_key)
    opened = refused = 0
    last_opened = first_refused_after = 0.0
    reasons: collections.Counter[str] = collections.Counter()
    for packet in _packets(_join(lines, args.interface), args.seconds):
        try:
            opener.open(packet)
        except SealError as exc:
            refused += 1
            reasons[exc.reason] += 1
            first_refused_after = first_refused_after or time.time()
            continue
        opened += 1
        last_opened = time.time()
        if opened == 100:
            _emit("ready", keys=[k.key_id for k in keys])
    _emit(
        "summary",
        opened=opened,
        refused=refused,
        reasons=dict(reasons),
        last_opened=last_opened,
        first_refused=first_refused_after,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m tests.integration.multicast_peers")
    sub = parser.add_subparsers(dest="role", required=True)
    spy_parser = sub.add_parser("spy")
    spy_parser.add_argument("--line", action="append", required=True)
    holder_parser = sub.add_parser("holder")
    holder_parser.add_argument("--admin", required=True)
    holder_parser.add_argument("--key-file", required=True)
    holder_parser.add_argument(
        "--tls-ca", required=True, help="the CA that signed the admin server's certificate"
    )
    for each in (spy_parser, holder_parser):
        each.add_argument("--interface", required=True)
        each.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args(argv)
    return spy(args) if args.role == "spy" else holder(args)


if __name__ == "__main__":
    sys.exit(main())
