"""MoldUDP64 downstream packets and the BinaryFILE capture layout (docs/wire-format.md).

Theory of operation
-------------------
A MoldUDP64 downstream packet is a 20-byte header -- the session (10 bytes,
ASCII, space padded), the sequence number of the packet's first message
(u64) and the message count (u16), all big-endian -- followed by ``count``
messages, each a u16 length and that many bytes. The i-th message (from 0)
has sequence number ``sequence + i``. A packet with count 0 is a heartbeat
(its sequence number is the next message's); count ``0xFFFF`` ends the
session.

The adapter turns a packet into its *record frame* (:func:`records_of`): one
record per message, ``u32 length of what follows | u64 source_seq | the
message``, so each record is one message that knows its own position and a
frame can be cut at any record (as the adapter does at a session fence or a
gap) and fed again. The length is 32 bits because a message block may hold
up to 65,535 bytes and a record adds its 8-byte position: every message the
wire allows has a record, and one that is no ITCH message (65,530 bytes of
an ``A``, say) reaches the parser and is quarantined there, costing only
itself. A message whose length runs past the packet's end keeps
its sequence number and the bytes that are there: it is quarantined at its
position (no gap), never half-read.

BinaryFILE is how NASDAQ publishes ITCH captures: every message is a u16
big-endian length and the message, back to back. Pure.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Final, NamedTuple

__all__ = [
    "END_OF_SESSION",
    "HEADER",
    "MAX_PACKET_BYTES",
    "Packet",
    "PacketError",
    "decode_packet",
    "encode_packet",
    "next_record",
    "read_binary_file",
    "record_seq",
    "records_of",
    "split_records",
]

HEADER: Final = struct.Struct(">10sQH")
END_OF_SESSION: Final = 0xFFFF
_MAX_RECORD_SEQ: Final = (1 << 64) - 1  # what a record's u64 holds: a message numbered past it says so
MAX_PACKET_BYTES: Final = 65_527  # what one UDP datagram carries (and a MoldUDP64 packet with it)
_LEN: Final = struct.Struct(">H")
_RECORD_LEN: Final = struct.Struct(">I")
_RECORD_HEAD: Final = struct.Struct(">IQ")
_SEQ: Final = struct.Struct(">Q")
SEQ_BYTES: Final = _SEQ.size


class PacketError(ValueError):
    """Bytes that are not a MoldUDP64 packet (the detail names what is wrong)."""


class Packet(NamedTuple):
    """One decoded downstream packet.

    Attributes:
        session: the session name (padding stripped).
        sequence: the first message's sequence number (a heartbeat's: the next message's).
        message_count: the header's count (0: heartbeat; :data:`END_OF_SESSION`: end of session).
        messages: the messages, in order (the last may be truncated: see ``truncated``).
        truncated: the last message's length ran past the packet's end.
        trailing: bytes after the counted messages (ignored, counted by the caller).
    """

    session: str
    sequence: int
    message_count: int
    messages: tuple[bytes, ...]
    truncated: bool
    trailing: int


def encode_packet(
    session: str, sequence: int, messages: Sequence[bytes], *, count: int | None = None
) -> bytes:
    """One downstream packet of ``messages`` starting at ``sequence``.

    Args:
        session: up to 10 ASCII characters (space padded).
        sequence: the first message's sequence number.
        messages: the messages (each at most 65,535 bytes).
        count: the header's count when it is not ``len(messages)`` (``END_OF_SESSION``).

    Raises:
        PacketError: a session that is not 10 ASCII characters or fewer, or a message too long.
    """
    name = session.encode("ascii", errors="replace")
    if len(name) > 10:
        raise PacketError(f"session {session!r} is longer than 10 characters")
    parts = [HEADER.pack(name.ljust(10), sequence, len(messages) if count is None else count)]
    for message in messages:
        if len(message) > 0xFFFF:
            raise PacketError(f"a message of {len(message)} bytes exceeds 65535")
        parts.append(_LEN.pack(len(message)))
        parts.append(message)
    return b"".join(parts)


def decode_packet(data: bytes) -> Packet:
    """Decode one packet (see the module docstring).

    Raises:
        PacketError: shorter than the header.
    """
    if len(data) < HEADER.size:
        raise PacketError(f"{len(data)} bytes is shorter than the {HEADER.size}-byte header")
    session, sequence, count = HEADER.unpack_from(data)
    messages: list[bytes] = []
    pos, end, truncated = HEADER.size, len(data), False
    wanted = 0 if count == END_OF_SESSION else count
    while len(messages) < wanted and pos < end:
        if pos + _LEN.size > end:
            messages.append(data[pos:end])
            truncated, pos = True, end
            break
        (length,) = _LEN.unpack_from(data, pos)
        start = pos + _LEN.size
        if start + length > end:
            truncated = True
        messages.append(data[start : start + length])
        pos = min(start + length, end)
    name = session.decode("ascii", errors="replace").rstrip(" ")
    return Packet(name, sequence, count, tuple(messages), truncated, end - pos)


def records_of(packet: Packet) -> bytes:
    """The record frame of a packet's messages (see the module docstring).

    A message numbered past ``proto.wire.MAX_SOURCE_SEQ`` (a hostile sequence number)
    keeps its record, its number capped at 2**64 - 1 where the u64 ends: the parser
    quarantines it (``bad_seq``), so every message of a packet is accounted for.
    """
    parts: list[bytes] = []
    for index, message in enumerate(packet.messages):
        seq = min(packet.sequence + index, _MAX_RECORD_SEQ)
        parts.append(_RECORD_HEAD.pack(SEQ_BYTES + len(message), seq))
        parts.append(message)
    return b"".join(parts)


def next_record(payload: bytes, pos: int) -> tuple[bytes | None, int]:
    """The record at ``pos``: ``(u64 source_seq + message, next position)``, or ``(None, end)``."""
    end = len(payload)
    if pos + _RECORD_HEAD.size > end:
        return None, end
    (length,) = _RECORD_LEN.unpack_from(payload, pos)
    after = pos + _RECORD_LEN.size + length
    if length < SEQ_BYTES or after > end:
        return None, end
    return payload[pos + _RECORD_LEN.size : after], after


def split_records(payload: bytes) -> tuple[list[bytes], int]:
    """Every record of a record frame, and how many malformed stretches (0 or 1, at the end)."""
    bodies: list[bytes] = []
    pos = bad = 0
    while pos < len(payload):
        body, pos = next_record(payload, pos)
        if body is None:
            bad += 1
        else:
            bodies.append(body)
    return bodies, bad


def record_seq(body: bytes) -> int:
    """The source_seq of a record's body (its first 8 bytes; 0 when shorter)."""
    return _SEQ.unpack_from(body)[0] if len(body) >= SEQ_BYTES else 0


def read_binary_file(data: bytes) -> Iterator[bytes]:
    """The messages of a BinaryFILE capture: u16 big-endian length, then the message.

    A last message cut short by the end of the file is yielded as it is (the
    adapters quarantine it); a zero length is yielded as an empty message.
    """
    pos, end = 0, len(data)
    while pos + _LEN.size <= end:
        (length,) = _LEN.unpack_from(data, pos)
        start = pos + _LEN.size
        yield data[start : start + length]
        pos = start + length
    if pos < end:
        yield data[pos:end]
