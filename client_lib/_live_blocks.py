"""The arbiter's fast path over one live packet's blocks: one tight loop, nothing changed.

A healthy channel's packets are either copies of what was delivered or the
next ``msg_seq``\\ s in order. :func:`read_live_blocks` walks such a packet's
block headers in one loop (no per-block method calls; a :class:`Delivery`
is built without ``__init__``) and returns what the arbiter needs to decide,
or ``None`` when the packet must take the general path, which checks and
names every fault (:func:`feedha.proto.wire.decode_blocks`). It changes no
state, so declining costs nothing but the walk. Pure.
"""

from __future__ import annotations

import struct
from typing import Final

from feedha.client.events import Delivery
from feedha.proto.wire import BLOCK_HEADER, HEADER_SIZE, TOMBSTONE_STREAM

__all__ = ["read_live_blocks"]

_UNPACK_BLOCK: Final = BLOCK_HEADER.unpack_from
_BLOCK_OVERHEAD: Final = BLOCK_HEADER.size
_MIN_BLOCK_LENGTH: Final = _BLOCK_OVERHEAD - 2  # the length field covers stream and seq

LiveBlocks = tuple[list[int], list[int], list[Delivery]]


def read_live_blocks(
    packet: bytes,
    next_seq: int,
    first: int,
    count: int,
    below: int,
    channel: int | None,
    line: int,
    term: int,
    send_time_ns: int,
    kind: type[Delivery],
) -> LiveBlocks | None:
    """Read a live packet whose first ``below`` blocks are copies and the rest the next to deliver.

    Args:
        packet: the packet (its header already read and checked).
        next_seq: the next ``msg_seq`` to deliver (``first + below``, when blocks are new).
        first: the packet's first ``msg_seq``; ``count``: its number of blocks.
        below: how many blocks lie below ``next_seq`` (copies).
        channel, line, term, send_time_ns, kind: what the new deliveries carry.

    Returns:
        Every block's ``source_stream`` and ``source_seq`` (in order), and a
        ``kind`` delivery for each block from ``next_seq`` on; ``None`` when a
        block is malformed, a tombstone (it becomes a ``Purged`` event), or the
        blocks do not end exactly at the packet's end.
    """
    unpack = _UNPACK_BLOCK
    streams: list[int] = []
    source_seqs: list[int] = []
    add_stream = streams.append
    add_source_seq = source_seqs.append
    deliveries: list[Delivery] = []
    offset = HEADER_SIZE
    try:
        for _ in range(below):
            length, stream, source_seq = unpack(packet, offset)
            if length < _MIN_BLOCK_LENGTH:
                return None
            add_stream(stream)
            add_source_seq(source_seq)
            offset += 2 + length
        if below < count:
            new = object.__new__
            deliver = deliveries.append
            for seq in range(next_seq, first + count):
                length, stream, source_seq = unpack(packet, offset)
                if length < _MIN_BLOCK_LENGTH or stream == TOMBSTONE_STREAM:
                    return None
                end = offset + 2 + length
                delivery = new(kind)
                delivery.channel = channel  # type: ignore[assignment]  # checked equal to the header's
                delivery.msg_seq = seq
                delivery.source_stream = stream
                delivery.source_seq = source_seq
                delivery.line = line
                delivery.term = term
                delivery.send_time_ns = send_time_ns
                delivery._packet = packet
                delivery._start = offset + _BLOCK_OVERHEAD
                delivery._end = end
                deliver(delivery)
                add_stream(stream)
                add_source_seq(source_seq)
                offset = end
    except struct.error:  # a block header runs past the end
        return None
    if offset != len(packet):
        return None
    return streams, source_seqs, deliveries
