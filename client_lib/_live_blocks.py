"""The arbiter's fast path over one live packet's blocks: one tight loop, nothing changed.

A healthy channel's packets are either copies of what was delivered or the
next ``msg_seq``\\ s in order. :func:`read_live_blocks` walks such a packet's
block headers in one loop (no per-block method calls; a :class:`Delivery`
is built without ``__init__``) and returns what the arbiter needs to decide,
or ``None`` when the packet must take the general path, which checks and
names every fault (:func:`feedha.proto.wire.decode_blocks`). It changes no
state, so declining costs nothing but the walk. Pure.

:func:`read_live_blocks_reference` is the walk in Python and the specification;
``feedha.client._blocks`` (``client_lib/_blocks.c``) is the same walk in C, a
fraction of the cost a message, and the tests hold the two to the same result
for every packet. This module is the one place that chooses: at import,
:data:`read_live_blocks` is the C walk when the extension is built, else the
reference, with a warning that says why (``WHY_NOT_NATIVE``).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import Final

from feedha.client._blocks_ext import BLOCKS, WHY_NOT_BUILT
from feedha.client.events import Delivery
from feedha.proto.wire import BLOCK_HEADER, HEADER_SIZE, TOMBSTONE_STREAM

__all__ = ["WHY_NOT_NATIVE", "LiveBlocks", "Stamp", "read_live_blocks", "read_live_blocks_reference"]

logger = logging.getLogger(__name__)

_UNPACK_BLOCK: Final = BLOCK_HEADER.unpack_from
_BLOCK_OVERHEAD: Final = BLOCK_HEADER.size
_MIN_BLOCK_LENGTH: Final = _BLOCK_OVERHEAD - 2  # the length field covers stream and seq

LiveBlocks = tuple[list[int], list[int], list[Delivery]]
# What every new delivery of one packet carries besides its block: its class, the
# channel (checked equal to the header's), the line, the term and the send time.
Stamp = tuple[type[Delivery], int | None, int, int, int]


def read_live_blocks_reference(
    packet: bytes, next_seq: int, first: int, count: int, below: int, stamp: Stamp
) -> LiveBlocks | None:
    """Read a live packet whose first ``below`` blocks are copies and the rest the next to deliver.

    ``next_seq`` is ``first + below`` when blocks are new; ``packet``'s header was read and checked.

    Returns:
        Every block's ``source_stream`` and ``source_seq``, in order, and a
        delivery for each block from ``next_seq`` on; ``None`` when a block is
        malformed or a tombstone (a ``Purged`` event), or the blocks do not end
        exactly at the packet's end.
    """
    unpack, new = _UNPACK_BLOCK, object.__new__
    streams: list[int] = []
    source_seqs: list[int] = []
    deliveries: list[Delivery] = []
    add_stream, add_source_seq, deliver = streams.append, source_seqs.append, deliveries.append
    offset = HEADER_SIZE
    try:
        for _ in range(below):
            length, stream, source_seq = unpack(packet, offset)
            if length < _MIN_BLOCK_LENGTH:
                return None
            add_stream(stream)
            add_source_seq(source_seq)
            offset += 2 + length
        kind, channel, line, term, send_time_ns = stamp
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
            delivery._update = None
            deliver(delivery)
            add_stream(stream)
            add_source_seq(source_seq)
            offset = end
    except struct.error:  # a block header runs past the end
        return None
    return (streams, source_seqs, deliveries) if offset == len(packet) else None


read_live_blocks: Callable[[bytes, int, int, int, int, Stamp], LiveBlocks | None] = (
    read_live_blocks_reference if BLOCKS is None else BLOCKS.read_live_blocks
)
WHY_NOT_NATIVE = WHY_NOT_BUILT
if WHY_NOT_NATIVE is not None:
    logger.warning(
        "the client's block walk runs on the Python reference (3-5x slower a block): %s", WHY_NOT_NATIVE
    )
