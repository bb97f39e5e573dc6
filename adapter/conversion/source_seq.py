"""A FIX message body's source sequence number (``34=``), read without parsing the rest.

Every engine whose messages are FIX reads a body's sequence number with
:func:`peek_source_seq` (:attr:`ConversionEngine.peek_seq
<adapter.conversion.engine.ConversionEngine.peek_seq>`) for a message that
cannot be converted but must still be accounted for. Pure: no sockets, no clock.
"""

from __future__ import annotations

from typing import Final

from feedha.adapter.errors import ConversionError
from feedha.proto.wire import MAX_SOURCE_SEQ

__all__ = ["peek_source_seq"]

_SOH: Final = b"\x01"
_SEQ_TAG_DEFAULT: Final = 34
_MAX_SEQ_DIGITS: Final = len(str(MAX_SOURCE_SEQ))
_SEQ_KEYS: dict[int, tuple[bytes, bytes]] = {}


def peek_source_seq(body: bytes, *, tag: int = _SEQ_TAG_DEFAULT) -> int:
    """Extract the source sequence number (tag 34) without parsing the rest.

    Args:
        body: one message body as :func:`proto.fix.split_messages` returns it.
        tag: the sequence tag (34, FIX MsgSeqNum).

    Returns:
        The sequence number (> 0).

    Raises:
        ConversionError: ``missing_seq`` or ``bad_seq``.
    """
    # The tag's byte strings are built once per tag, not per message.
    keys = _SEQ_KEYS.get(tag)
    if keys is None:
        keys = _SEQ_KEYS[tag] = (b"%d=" % tag, b"\x01%d=" % tag)
    key, inner_key = keys
    if body.startswith(key):
        start = len(key)
    else:
        found = body.find(inner_key)
        if found < 0:
            raise ConversionError("missing_seq", f"no {tag}= field")
        start = found + len(inner_key)
    end = body.find(_SOH, start)
    raw = body[start:] if end < 0 else body[start:end]
    # No sign, no leading zero, no "0"; the length is checked before int() reads the digits.
    if not raw.isdigit() or raw[0] == 0x30 or len(raw) > _MAX_SEQ_DIGITS or int(raw) > MAX_SOURCE_SEQ:
        raise ConversionError("bad_seq", f"{tag}={raw[:24]!r}")
    return int(raw)
