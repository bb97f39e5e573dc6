"""FIX captures, as both FIX formats (``feedha-fix``, ``fix44``) read, play and write them.

A capture is either raw FIX messages back to back, or one message per line
with an optional ``TIMESTAMP : `` prefix, as FIX engines log them (a line
whose messages use ``|`` for the field separator is taken too). Everything
from a line's first ``8=FIX`` on is cut into messages by their length and
checksum fields; a stretch that is no FIX message is kept as it is, so the
adapters quarantine it (a capture is played back as it was, warts and all).
Messages due together go out as one frame, back to back; a message's own time
(``52`` SendingTime, else ``60`` TransactTime) paces ``--speed``. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from feedha.adapter.formats.capture_face import Capture, check_size
from feedha.proto import fix

__all__ = ["fix_frames", "fix_seq_of", "message_time_ns", "read_capture", "write_capture"]

_BEGIN: Final = b"8=FIX"
_TIME_FIELD: Final = re.compile(rb"\x01(52|60)=([0-9:.\-]{17,30})\x01")


def read_capture(data: bytes) -> Capture:
    """Cut a capture's bytes into messages (see the module docstring).

    Raises:
        ValueError: more than :data:`~adapter.formats.capture_face.MAX_CAPTURE_BYTES`, or no
            FIX message at all.
    """
    check_size(data)
    raw = data.find(_BEGIN)
    if raw < 0:
        raise ValueError("no FIX message in the capture (nothing starts with 8=FIX)")
    # Raw (back to back) when the first message ends where the next begins or the data ends.
    body, after = fix.next_message(data, raw)
    is_raw = raw == 0 and body is not None and (after >= len(data) or data.startswith(_BEGIN, after))
    chunks = [data] if is_raw else [_line(line) for line in data.splitlines()]
    messages: list[bytes] = []
    malformed = 0
    for chunk in chunks:
        pos = 0
        while pos < len(chunk):
            start = pos
            body, pos = fix.next_message(chunk, pos)
            messages.append(chunk[start:pos])
            malformed += body is None
    return Capture(tuple(message for message in messages if message.strip()), malformed)


def _line(line: bytes) -> bytes:
    begin = line.find(_BEGIN)
    if begin < 0:
        return b""
    text = line[begin:].rstrip(b"\r")
    if b"\x01" not in text and b"|" in text:
        text = text.replace(b"|", b"\x01")
    return text


def write_capture(messages: Sequence[bytes]) -> bytes:
    """The raw capture of ``messages``: back to back."""
    return b"".join(messages)


def fix_frames(messages: Sequence[bytes], first: int, end: int) -> list[bytes]:
    """Messages ``first`` to ``end - 1`` as one frame, back to back."""
    return [b"".join(messages[first:end])]


def fix_seq_of(messages: Sequence[bytes], index: int) -> int | None:
    """Message ``index``'s MsgSeqNum (34=), when its header shows one."""
    return fix.find_seq_num(messages[index])


def message_time_ns(message: bytes) -> int | None:
    """A message's time for pacing: ``52`` SendingTime, else ``60`` (``None``: neither readable)."""
    found = _TIME_FIELD.search(message)
    if found is None:
        return None
    try:
        return fix.parse_timestamp(found.group(2))
    except fix.FixError:
        return None
