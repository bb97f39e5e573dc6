"""The data-plane wire format: packets of sequenced message blocks on a line.

Theory of operation
-------------------
A line is a ZeroMQ PUB socket. Every ZeroMQ message on it has two frames,
``[topic, packet]``; the topic is the channel name in UTF-8. A packet is a
32-byte header followed by ``count`` blocks. All integers are big-endian.

Header (``struct`` format ``">2sBBHHIQHHQ"``)::

    offset size field
         0    2 magic b"FH"
         2    1 version (1; 2 is a sealed packet, see proto.seal)
         3    1 flags: bit 0 heartbeat, bit 1 retransmission, bit 2 end of session,
                  bit 3 delayed (a packet of a delayed line or a delayed replay)
         4    2 channel number
         6    2 adapter number
         8    4 term
        12    8 msg_seq of the first block (heartbeat: the next msg_seq)
        20    2 count of blocks (0 for a heartbeat)
        22    2 reserved, 0
        24    8 send time, ns since the Unix epoch

Block *i* carries ``msg_seq = first + i`` and is laid out as::

    u16 length       -- bytes that follow the length field: 10 + len(payload)
    u16 source_stream
    u64 source_seq
    payload          -- the protobuf-encoded feedha.v1.MarketUpdate

A block whose ``source_stream`` is 0 (:data:`TOMBSTONE_STREAM`; no source
stream has that number) is a *tombstone*: the message numbered there was
purged before the delayed line delivered it. Its ``source_seq`` is the purged
message's, its payload a ``feedha.v1.Tombstone`` (symbol, purge id, reason).
So ``msg_seq`` stays gap-free on a delayed line and in retransmissions.

A receiver can therefore arbitrate, check ``(source_stream, source_seq)``
conflicts and detect gaps from the headers alone and decode protobuf only for
what it delivers. This module is pure: no sockets, no clock.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from feedha.proto.errors import ProtoError

MAGIC: Final = b"FH"
VERSION: Final = 1
# A sealed packet (proto.seal): same header with this version, encrypted body.
SEALED_VERSION: Final = 2

FLAG_HEARTBEAT: Final = 0x01
FLAG_RETRANSMISSION: Final = 0x02
FLAG_END_OF_SESSION: Final = 0x04
FLAG_DELAYED: Final = 0x08  # a delayed line's packet, or a delayed replay's (with FLAG_RETRANSMISSION)
FLAG_CONFLATED: Final = 0x10  # a conflated line's packet: numbered by conf_seq, not msg_seq
FLAG_END_OF_INTERVAL: Final = 0x20  # the last packet of a conflation interval (with FLAG_CONFLATED)
_KNOWN_FLAGS: Final = (
    FLAG_HEARTBEAT
    | FLAG_RETRANSMISSION
    | FLAG_END_OF_SESSION
    | FLAG_DELAYED
    | FLAG_CONFLATED
    | FLAG_END_OF_INTERVAL
)

# A block with this source_stream is a tombstone: the message at its msg_seq was purged.
TOMBSTONE_STREAM: Final = 0
# The source_stream of a conflated line's block (no source stream has that number): its
# source_seq is the msg_seq of the interval's boundary, its payload the symbol's state there.
CONFLATED_STREAM: Final = 0xFFFF

HEADER: Final = struct.Struct(">2sBBHHIQHHQ")
BLOCK_HEADER: Final = struct.Struct(">HHQ")
_PACK_BLOCK_HEADER: Final = BLOCK_HEADER.pack
HEADER_SIZE: Final = HEADER.size  # 32
BLOCK_OVERHEAD: Final = BLOCK_HEADER.size  # 12
# The length field counts the source_stream and source_seq fields too.
BLOCK_LENGTH_COVERS: Final = BLOCK_OVERHEAD - 2
MAX_PAYLOAD: Final = 0xFFFF - BLOCK_LENGTH_COVERS
MAX_COUNT: Final = 0xFFFF
# The highest source position (source_seq) of any input format: the position after it is an
# int64 too, which the conversion's runs take as the next one expected. A message numbered
# higher is quarantined (bad_seq); docs/robustness.md.
MAX_SOURCE_SEQ: Final = (1 << 63) - 2

# Default packet budget: well under the 64 KiB a PGM APDU or a TCP frame allows,
# big enough to carry ~80 typical market updates.
DEFAULT_MAX_PACKET_BYTES: Final = 8192

assert HEADER_SIZE == 32 and BLOCK_OVERHEAD == 12


class WireError(ProtoError):
    """A packet that does not follow the wire format.

    Attributes:
        reason: a short machine-readable cause (``"magic"``, ``"version"``,
            ``"sealed"`` (a version-2 packet: open it with ``proto.seal.Opener``
            first), ``"truncated"``, ``"length"``, ``"count"``, ``"flags"``).
    """

    subject = "bad packet"


@dataclass(frozen=True, slots=True)
class PacketHeader:
    """The decoded fixed header of a packet."""

    flags: int
    channel: int
    adapter: int
    term: int
    first_seq: int
    count: int
    send_time_ns: int

    @property
    def is_heartbeat(self) -> bool:
        return bool(self.flags & FLAG_HEARTBEAT)

    @property
    def is_retransmission(self) -> bool:
        return bool(self.flags & FLAG_RETRANSMISSION)

    @property
    def is_end_of_session(self) -> bool:
        return bool(self.flags & FLAG_END_OF_SESSION)

    @property
    def is_delayed(self) -> bool:
        return bool(self.flags & FLAG_DELAYED)

    @property
    def is_conflated(self) -> bool:
        return bool(self.flags & FLAG_CONFLATED)

    @property
    def is_end_of_interval(self) -> bool:
        return bool(self.flags & FLAG_END_OF_INTERVAL)

    @property
    def next_seq(self) -> int:
        """The msg_seq that follows the last block (for a heartbeat, first_seq)."""
        return self.first_seq + self.count


@dataclass(frozen=True, slots=True)
class Block:
    """One sequenced message inside a packet."""

    msg_seq: int
    source_stream: int
    source_seq: int
    payload: bytes

    @property
    def is_tombstone(self) -> bool:
        """Whether this block stands for a purged message (its payload is a ``Tombstone``)."""
        return self.source_stream == TOMBSTONE_STREAM


def encode_header(
    *,
    flags: int,
    channel: int,
    adapter: int,
    term: int,
    first_seq: int,
    count: int,
    send_time_ns: int,
) -> bytes:
    """Encode a 32-byte packet header.

    Raises:
        struct.error: a field does not fit its width.
    """
    return HEADER.pack(MAGIC, VERSION, flags, channel, adapter, term, first_seq, count, 0, send_time_ns)


def encode_block(source_stream: int, source_seq: int, payload: bytes) -> bytes:
    """Encode one block (without its msg_seq, which the packet position gives).

    Raises:
        ValueError: the payload is longer than a block can carry.
    """
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"payload of {len(payload)} bytes exceeds the block limit of {MAX_PAYLOAD}")
    return BLOCK_HEADER.pack(len(payload) + BLOCK_LENGTH_COVERS, source_stream, source_seq) + payload


def encode_packet(
    *,
    channel: int,
    adapter: int,
    term: int,
    first_seq: int,
    blocks: Sequence[tuple[int, int, bytes]],
    send_time_ns: int,
    flags: int = 0,
) -> bytes:
    """Encode a whole packet.

    Args:
        channel: channel number (u16).
        adapter: sending adapter number (u16).
        term: the sender's fencing term (u32).
        first_seq: msg_seq of the first block; for a heartbeat, the next msg_seq.
        blocks: ``(source_stream, source_seq, payload)`` triples, in msg_seq order.
        send_time_ns: send time, ns since the Unix epoch.
        flags: ``FLAG_*`` bits; ``FLAG_HEARTBEAT`` is set automatically when
            ``blocks`` is empty.

    Returns:
        The packet bytes.

    Raises:
        ValueError: too many blocks or a payload too long.
    """
    if len(blocks) > MAX_COUNT:
        raise ValueError(f"{len(blocks)} blocks exceed the packet limit of {MAX_COUNT}")
    if not blocks:
        flags |= FLAG_HEARTBEAT
    parts = [
        encode_header(
            flags=flags,
            channel=channel,
            adapter=adapter,
            term=term,
            first_seq=first_seq,
            count=len(blocks),
            send_time_ns=send_time_ns,
        )
    ]
    parts.extend(encode_block(stream, seq, payload) for stream, seq, payload in blocks)
    return b"".join(parts)


def decode_header(packet: bytes | memoryview) -> PacketHeader:
    """Decode and validate the fixed header.

    Raises:
        WireError: short packet, wrong magic or version (``"sealed"`` for a
            sealed packet not yet opened), unknown flags, or a heartbeat that
            carries blocks.
    """
    if len(packet) < HEADER_SIZE:
        raise WireError("truncated", f"{len(packet)} bytes, a header needs {HEADER_SIZE}")
    magic, version, flags, channel, adapter, term, first_seq, count, _reserved, send_ns = HEADER.unpack_from(
        packet, 0
    )
    if magic != MAGIC:
        raise WireError("magic", f"magic {bytes(magic)!r}, expected {MAGIC!r}")
    if version == SEALED_VERSION:
        raise WireError("sealed", "a sealed (version 2) packet: open it with proto.seal.Opener first")
    if version != VERSION:
        raise WireError("version", f"version {version}, this decoder reads {VERSION}")
    if flags & ~_KNOWN_FLAGS:
        raise WireError("flags", f"unknown flag bits {flags:#04x}")
    if flags & FLAG_HEARTBEAT and count:
        raise WireError("count", f"heartbeat with {count} blocks")
    return PacketHeader(flags, channel, adapter, term, first_seq, count, send_ns)


def decode_blocks(packet: bytes, header: PacketHeader) -> list[tuple[int, int, int, int]]:
    """Walk the blocks of a packet without copying payloads.

    Returns:
        One ``(source_stream, source_seq, payload_start, payload_end)`` tuple per
        block; block *i* has msg_seq ``header.first_seq + i``. Slice ``packet``
        with the offsets to get a payload.

    Raises:
        WireError: a block runs past the end, the count is wrong, or bytes trail.
    """
    out: list[tuple[int, int, int, int]] = []
    offset = HEADER_SIZE
    end = len(packet)
    unpack = BLOCK_HEADER.unpack_from
    for index in range(header.count):
        if offset + BLOCK_OVERHEAD > end:
            raise WireError("truncated", f"block {index} header at offset {offset} runs past {end}")
        length, stream, seq = unpack(packet, offset)
        if length < BLOCK_LENGTH_COVERS:
            raise WireError("length", f"block {index} length {length} is below {BLOCK_LENGTH_COVERS}")
        start = offset + BLOCK_OVERHEAD
        stop = offset + 2 + length
        if stop > end:
            raise WireError("truncated", f"block {index} ends at {stop}, packet has {end} bytes")
        out.append((stream, seq, start, stop))
        offset = stop
    if offset != end:
        raise WireError("length", f"{end - offset} bytes trail the {header.count} blocks")
    return out


def decode_packet(packet: bytes) -> tuple[PacketHeader, list[Block]]:
    """Decode a packet into its header and blocks (copies payloads; for tools and tests).

    Raises:
        WireError: the packet does not follow the format.
    """
    header = decode_header(packet)
    blocks = [
        Block(header.first_seq + i, stream, seq, packet[start:stop])
        for i, (stream, seq, start, stop) in enumerate(decode_blocks(packet, header))
    ]
    return header, blocks


class PacketBuilder:
    """Accumulates blocks for one packet and says when it is full.

    The publisher adds blocks while it has messages ready and flushes when
    :meth:`add` reports the packet full or when it has nothing more to send
    right now, so batching never adds latency at low rates.

    Args:
        max_bytes: packet budget including the header.
    """

    __slots__ = ("_max_bytes", "_parts", "_size", "first_seq", "count")

    def __init__(self, max_bytes: int = DEFAULT_MAX_PACKET_BYTES) -> None:
        if max_bytes < HEADER_SIZE + BLOCK_OVERHEAD + 1:
            raise ValueError(f"max_bytes must leave room for one block, got {max_bytes}")
        self._max_bytes = max_bytes
        self._parts: list[bytes] = [b""]
        self._size = HEADER_SIZE
        self.first_seq = 0
        self.count = 0

    def __repr__(self) -> str:
        return f"<PacketBuilder [first_seq={self.first_seq}, count={self.count}, bytes={self._size}]>"

    def fits(self, payload_len: int) -> bool:
        """Whether a block with this payload fits in the current packet."""
        return self.count == 0 or (
            self._size + BLOCK_OVERHEAD + payload_len <= self._max_bytes and self.count < MAX_COUNT
        )

    def add(self, msg_seq: int, source_stream: int, source_seq: int, payload: bytes) -> None:
        """Append a block; its msg_seq must follow the previous block's.

        Raises:
            ValueError: msg_seq out of order, or the block does not fit (call
                :meth:`fits` first and flush).
        """
        # Strategy: the checks of fits() and encode_block() inline (this runs
        # once per published message), with the same errors.
        size = len(payload)
        count = self.count
        if count == 0:
            self.first_seq = msg_seq
        elif msg_seq != self.first_seq + count:
            raise ValueError(f"msg_seq {msg_seq} does not follow {self.first_seq + count - 1}")
        elif self._size + BLOCK_OVERHEAD + size > self._max_bytes or count >= MAX_COUNT:
            raise ValueError(f"block of {size} bytes does not fit; flush first")
        if size > MAX_PAYLOAD:
            raise ValueError(f"payload of {size} bytes exceeds the block limit of {MAX_PAYLOAD}")
        self._parts.append(
            _PACK_BLOCK_HEADER(size + BLOCK_LENGTH_COVERS, source_stream, source_seq) + payload
        )
        self._size += BLOCK_OVERHEAD + size
        self.count = count + 1

    def room(self) -> int:
        """Bytes left for blocks, negated when the packet is empty (its first block always fits).

        The convention of ``adapter.formats.feedha_fix._fastpath.FastPath.run``'s ``room`` argument.
        """
        left = self._max_bytes - self._size
        # A lone oversize block (it always fits an empty packet) leaves no room, not negative room.
        return -left if self.count == 0 else max(left, 0)

    def add_blocks(self, first_seq: int, count: int, blocks: bytes) -> None:
        """Append ``count`` encoded blocks (``encode_block`` output back to back) numbered from ``first_seq``.

        The caller sized them with :meth:`room` (the C fast path does); only
        the numbering and the block count are checked here.

        Raises:
            ValueError: first_seq does not follow the previous block, or too many blocks.
        """
        if count <= 0:
            return
        if self.count == 0:
            self.first_seq = first_seq
        elif first_seq != self.first_seq + self.count:
            raise ValueError(f"msg_seq {first_seq} does not follow {self.first_seq + self.count - 1}")
        if self.count + count > MAX_COUNT:
            raise ValueError(f"{self.count + count} blocks exceed the packet limit of {MAX_COUNT}")
        self._parts.append(blocks)
        self._size += len(blocks)
        self.count += count

    @property
    def next_seq(self) -> int:
        """The msg_seq the next block must have (valid once a block was added)."""
        return self.first_seq + self.count

    def build(self, *, channel: int, adapter: int, term: int, send_time_ns: int, flags: int = 0) -> bytes:
        """Return the packet and reset the builder.

        Raises:
            ValueError: the builder is empty (send a heartbeat with :func:`encode_packet`).
        """
        if self.count == 0:
            raise ValueError("no blocks to build a packet from")
        self._parts[0] = encode_header(
            flags=flags,
            channel=channel,
            adapter=adapter,
            term=term,
            first_seq=self.first_seq,
            count=self.count,
            send_time_ns=send_time_ns,
        )
        packet = b"".join(self._parts)
        self._parts = [b""]
        self._size = HEADER_SIZE
        self.count = 0
        return packet

    def __len__(self) -> int:
        return self.count
