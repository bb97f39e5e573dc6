"""One integer field of a delivery's payload, read without decoding the rest.

Theory of operation
-------------------
A subscriber that times its messages needs one field of each: the event time
the source stamped (``MarketUpdate.event_time_ns``). Decoding the whole
``MarketUpdate`` for it (symbol, entries, state) costs ~1.2-2.4 µs a message in
the protobuf runtime, a quarter of a bench client's CPU at 50k msg/s.
:func:`read_int64_field` walks the payload's fields instead, skipping each by
its wire type, and keeps the last varint of the field it is asked for
(protobuf's rule for a scalar field seen twice): well under a microsecond.

It answers only where the walk is plain: every field's tag and length read
inside the payload, no group, no unknown wire type. Anything else returns
``None`` and the caller decodes the payload whole, which names the fault as
:attr:`Delivery.update <feedha.client.events.Delivery.update>` does. So where
it answers, the protobuf runtime reads the same value; it does not check what
it skips (a string's UTF-8), so it may answer where a full decode raises.

The C twin is ``read_int64_field`` in ``client_lib/_blocks.c``; without it
:data:`read_int64_field` always says "decode" (the reference, interpreted, is
slower than the protobuf runtime's whole decode).
``tests/unit/client_lib/test_payload_fields.py`` compares the two with each
other and with the protobuf runtime on payloads that the runtime writes and
that Hypothesis writes byte by byte. Pure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from feedha.client._blocks_ext import BLOCKS, WHY_NOT_BUILT

__all__ = ["WHY_NOT_NATIVE", "read_int64_field", "read_int64_field_reference"]

logger = logging.getLogger(__name__)

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_MAX_VARINT_BYTES = 10  # a 64-bit varint; the protobuf runtime refuses an eleventh byte
_MAX_TAG_BYTES = 5  # a tag is a 32-bit varint
_U64 = (1 << 64) - 1


def _varint(data: bytes, pos: int, end: int, limit: int) -> tuple[int, int] | None:
    # (value, next position) of the varint at pos, its bits beyond 64 dropped as the runtime
    # drops them; None if it runs past end or past limit bytes.
    value = shift = 0
    for i in range(pos, min(end, pos + limit)):
        byte = data[i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & _U64, i + 1
        shift += 7
    return None


def read_int64_field_reference(packet: bytes, start: int, end: int, field: int) -> int | None:
    """The last varint of ``field`` in the protobuf message ``packet[start:end]``, as an int64.

    Returns:
        Its value (0 if the field is absent, the proto3 default); ``None`` if the walk is
        not plain (a tag or a length runs past the end, a group, wire type 6 or 7, field
        number 0, a tag beyond 32 bits, a packet that is not ``bytes``, bounds outside
        it): the caller decodes the payload whole.
    """
    if type(packet) is not bytes or not 0 <= start <= end <= len(packet):
        return None
    value, pos = 0, start
    while pos < end:
        tag = _varint(packet, pos, end, _MAX_TAG_BYTES)
        if tag is None or tag[0] > 0xFFFFFFFF or tag[0] >> 3 == 0:
            return None
        key, pos = tag
        kind = key & 7
        if kind == _VARINT:
            read = _varint(packet, pos, end, _MAX_VARINT_BYTES)
            if read is None:
                return None
            if key >> 3 == field:
                value = read[0]
            pos = read[1]
        elif kind == _I64:
            pos += 8
        elif kind == _I32:
            pos += 4
        elif kind == _LEN:
            read = _varint(packet, pos, end, _MAX_VARINT_BYTES)
            if read is None:
                return None
            pos = read[1] + read[0]
        else:  # a group (3, 4) or no wire type at all (6, 7)
            return None
        if pos > end:
            return None
    return value - (1 << 64) if value >> 63 else value


def _decode_instead(packet: bytes, start: int, end: int, field: int) -> int | None:
    # Without the C walk: the Python reference (~7 µs) is slower than the protobuf runtime's
    # whole decode (~1-2.4 µs), so it says "decode" and the caller does.
    return None


read_int64_field: Callable[[bytes, int, int, int], int | None] = (
    _decode_instead if BLOCKS is None else BLOCKS.read_int64_field
)
WHY_NOT_NATIVE = WHY_NOT_BUILT
if WHY_NOT_NATIVE is not None:
    logger.warning("a payload's single fields are read by decoding it whole: %s", WHY_NOT_NATIVE)
