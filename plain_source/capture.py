"""Captured feeds: read a capture file into messages and pace its playback (pure).

A capture is either raw FIX messages back to back, or one message per line
with an optional ``TIMESTAMP : `` prefix, as FIX engines log them (a line
whose messages use ``|`` for the field separator is taken too). Everything
from a line's first ``8=FIX`` on is cut into messages by their length and
checksum fields; a stretch that is no FIX message is kept as it is, so the
adapters quarantine it (a capture is played back as it was, warts and all).

:func:`due_offsets` paces the playback: at a fixed rate, or by the messages'
own times (``52`` SendingTime, else ``60`` TransactTime) divided by a speed,
or all at once. Pure: no clock, no file (the caller reads the bytes).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from feedha.proto import fix

__all__ = ["MAX_CAPTURE_BYTES", "Capture", "due_offsets", "message_time_ns", "read_capture"]

MAX_CAPTURE_BYTES: Final = 1 << 30  # a capture is read whole: a bound on what one may hold
_BEGIN: Final = b"8=FIX"
_TIME_FIELD: Final = re.compile(rb"\x01(52|60)=([0-9:.\-]{17,30})\x01")


@dataclass(frozen=True, slots=True)
class Capture:
    """The messages of a capture, in order (malformed stretches included, as they were)."""

    messages: tuple[bytes, ...]
    malformed: int  # stretches that are no FIX message


def read_capture(data: bytes) -> Capture:
    """Cut a capture's bytes into messages (see the module docstring).

    Raises:
        ValueError: more than :data:`MAX_CAPTURE_BYTES`, or no FIX message at all.
    """
    if len(data) > MAX_CAPTURE_BYTES:
        raise ValueError(f"capture of {len(data)} bytes exceeds {MAX_CAPTURE_BYTES}")
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


def message_time_ns(message: bytes) -> int | None:
    """A message's time for pacing: ``52`` SendingTime, else ``60`` (``None``: neither readable)."""
    found = _TIME_FIELD.search(message)
    if found is None:
        return None
    try:
        return fix.parse_timestamp(found.group(2))
    except fix.FixError:
        return None


def due_offsets(
    messages: Sequence[bytes],
    *,
    rate: float | None = None,
    speed: float | None = None,
    burst: tuple[float, float] | None = None,
) -> list[float]:
    """When each message is due, in seconds from the start of the playback.

    Args:
        messages: the capture's messages.
        rate: a fixed rate (messages/s).
        speed: pace by the messages' own times, ``speed`` times as fast (1.0: as recorded);
            a message without a readable time goes with the one before it.
        burst: ``(burst_rate, seconds)``: the first ``seconds`` at ``burst_rate``, then ``rate``
            (with ``rate`` only).
        With neither, everything is due at once (as fast as possible).

    Raises:
        ValueError: both given, or one not positive; a burst without a rate, or not positive.
    """
    if rate is not None and speed is not None:
        raise ValueError("give a rate or a speed, not both")
    if burst is not None and (rate is None or not (burst[0] > 0 and burst[1] > 0)):
        raise ValueError(f"a burst needs a rate and a positive rate and length, got {burst}")
    if rate is not None:
        if rate <= 0:
            raise ValueError(f"rate must be positive, got {rate}")
        return _rate_offsets(len(messages), rate, burst)
    if speed is None:
        return [0.0] * len(messages)
    if speed <= 0:
        raise ValueError(f"speed must be positive, got {speed}")
    offsets: list[float] = []
    first: int | None = None
    previous = 0.0
    for message in messages:
        stamp = message_time_ns(message)
        if stamp is not None and first is None:
            first = stamp
        if stamp is not None and first is not None:
            previous = max(previous, (stamp - first) / 1e9 / speed)  # never backwards
        offsets.append(previous)
    return offsets


def _rate_offsets(count: int, rate: float, burst: tuple[float, float] | None) -> list[float]:
    # Message i is due at i / rate; after a burst of n messages in `seconds`, at seconds + (i - n) / rate.
    if burst is None:
        return [index / rate for index in range(count)]
    burst_rate, seconds = burst
    first = min(count, int(burst_rate * seconds))
    return [index / burst_rate for index in range(first)] + [
        seconds + (index - first) / rate for index in range(first, count)
    ]
