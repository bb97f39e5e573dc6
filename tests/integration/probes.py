"""A hostile test source and raw taps on adapters' lines, decoded from the public wire format.

Shared by the poison probe and the source pump's tests. The source is the
test's own ZeroMQ publisher: normal messages at a steady rate, and once each,
*in place of* a normal message, every poison a broken or hostile source sends
(:data:`feedha.plain_source.frames.POISON_KINDS`) and a stretch of bytes with
no readable position at all. The taps are raw SUB sockets whose packets are
decoded here with ``struct``, from the layout docs/wire-format.md gives, not
with feedha's own codec.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator

import zmq

from feedha.plain_source.frames import POISON_KINDS, poison_message
from feedha.proto import fix

CHANNEL = "EQ-A-Z"
STREAM = b"A-Z"
HEADER = struct.Struct(">2sBBHHIQHHQ")  # docs/wire-format.md: the 32-byte packet header
BLOCK_HEAD = struct.Struct(">HHQ")  # u16 length (of what follows), u16 source_stream, u64 source_seq
SYMBOLS = ("AAPL", "IBM", "MSFT", "ORCL", "SAP", "VOD")


def decode_line_packet(packet: bytes) -> Iterator[tuple[int, int]]:
    """(msg_seq, source_seq) of every block of one packet, as the public wire format lays it out."""
    for msg_seq, source_seq, _payload in decode_line_blocks(packet):
        yield msg_seq, source_seq


def decode_line_blocks(packet: bytes) -> Iterator[tuple[int, int, bytes]]:
    """(msg_seq, source_seq, payload) of every block of one packet (docs/wire-format.md)."""
    magic, version, _flags, _channel, _adapter, _term, first, count, _reserved, _sent = HEADER.unpack_from(
        packet
    )
    assert magic == b"FH" and version == 1
    pos = HEADER.size
    for index in range(count):
        length, _stream, source_seq = BLOCK_HEAD.unpack_from(packet, pos)
        start = pos + BLOCK_HEAD.size
        pos += 2 + length
        yield first + index, source_seq, packet[start:pos]
    assert pos == len(packet)


def _normal(seq: int) -> bytes:
    entry = fix.SourceEntry(
        fix.ENTRY_TRADE if seq % 3 else fix.ENTRY_BID, f"{100 + seq % 50}.25", 1 + seq % 9
    )
    return fix.encode_market_data(
        source_seq=seq, symbol=SYMBOLS[seq % len(SYMBOLS)], event_time_ns=1_790_000_000_000_000_000 + seq,
        entries=[entry],
    )  # fmt: skip


class Source:
    """The test's own publisher: normal messages, and each poison once in place of one."""

    def __init__(self, endpoint: str, *, rate: float, seconds: float) -> None:
        self.pub: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.XPUB)
        self.pub.linger, self.pub.sndhwm = 0, 0
        self.pub.setsockopt(zmq.XPUB_VERBOSE, 1)  # every adapter's subscription, not only the first
        self.pub.bind(endpoint)
        self.rate, self.total = rate, int(rate * seconds)
        kinds = [*POISON_KINDS, "unreadable"]
        # Once each, spread over the middle of the run, in place of a normal message.
        self.poison_at = {self.total * (i + 2) // (len(kinds) + 3): kind for i, kind in enumerate(kinds)}
        self.normal: set[int] = set()
        self.seq = 0
        self.started = 0.0

    def wait_subscribers(self, count: int, timeout: float) -> None:
        deadline, seen = time.monotonic() + timeout, 0
        while seen < count:
            assert time.monotonic() < deadline, f"only {seen} of {count} adapters subscribed"
            if self.pub.poll(100) and self.pub.recv()[:1] == b"\x01":
                seen += 1
        self.started = time.monotonic()

    @property
    def done(self) -> bool:
        return self.seq >= self.total

    def send_due(self) -> None:
        """Send what is due by now (at most a millisecond's worth per frame)."""
        due = min(self.total, int((time.monotonic() - self.started) * self.rate) + 1)
        parts = []
        while self.seq < due and len(parts) < max(1, int(self.rate / 1000)):
            self.seq += 1
            parts.append(self._message(self.seq))
        if parts:
            self.pub.send_multipart([STREAM, b"".join(parts)])

    def _message(self, seq: int) -> bytes:
        kind = self.poison_at.get(seq)
        if kind is None:
            self.normal.add(seq)
            return _normal(seq)
        if kind == "unreadable":
            return b"no FIX here and no position to read"
        return poison_message(kind, _normal(seq), seq)

    def close(self) -> None:
        self.pub.close(linger=0)


class Taps:
    """Raw SUB sockets on every line, decoded with :func:`decode_line_packet`."""

    def __init__(self, lines: dict[int, str]) -> None:
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self.poller = zmq.Poller()
        self.sockets: dict[zmq.Socket[bytes], int] = {}
        self.seen: dict[int, dict[int, int]] = {n: {} for n in lines}
        for number, endpoint in lines.items():
            sock = ctx.socket(zmq.SUB)
            sock.linger, sock.rcvhwm = 0, 0
            sock.subscribe(CHANNEL.encode())
            sock.connect(endpoint)
            self.sockets[sock] = number
            self.poller.register(sock, zmq.POLLIN)

    def drain(self, timeout_ms: float) -> int:
        """Read what arrived within ``timeout_ms``; returns how many blocks (heartbeats carry none)."""
        got = 0
        for sock, _ in self.poller.poll(timeout_ms):
            while True:
                try:
                    _topic, packet = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                line = self.seen[self.sockets[sock]]
                for msg_seq, source_seq in decode_line_packet(packet):
                    line[msg_seq] = source_seq
                    got += 1
        return got

    def close(self) -> None:
        for sock in self.sockets:
            sock.close(linger=0)
