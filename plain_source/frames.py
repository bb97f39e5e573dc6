"""Framing plans: the model's messages cut into ZeroMQ payloads, with malformed content injected.

Each payload is one or more FIX messages back to back. Garbage frames and
corrupted copies never consume a ``source_seq``. Pure: the caller passes the
random source of the garbage bytes and sends the frames.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Final

from feedha.plain_source.model import GeneratedMessage
from feedha.proto import fix

POISON_KINDS: Final = ("oversize_symbol", "bad_utf8", "bad_number", "overflow")
JUMP: Final = 10**12  # how far a poison jump message jumps
_EVENT_NS: Final = 1_790_000_000_000_000_000


def poison(msg: GeneratedMessage, index: int) -> list[bytes]:
    """Poison in place of ``msg``: a message with its source_seq that no adapter can publish.

    The kind rotates with ``index`` (:data:`POISON_KINDS`); every fifth poison
    also brings a message numbered :data:`JUMP` past it (a source_seq no
    stream could reach), which must not move anybody's numbering.
    """
    seq, kind = msg.source_seq, POISON_KINDS[index % len(POISON_KINDS)]
    trade = fix.ENTRY_TRADE
    symbol, entries = "POISON", [fix.SourceEntry(trade, "1.00", 1)]
    if kind == "oversize_symbol":
        symbol = "P" * 70_000  # a protobuf payload past the 65,525-byte block limit
    elif kind == "overflow":  # a volume past int64
        entries = [fix.SourceEntry(trade, "1.00", 2**62), fix.SourceEntry(trade, "1.00", 2**62)]
    elif kind == "bad_number":
        entries = [fix.SourceEntry(trade, "1.00", 10**40)]  # a size past int64
    data = fix.encode_market_data(source_seq=seq, symbol=symbol, event_time_ns=_EVENT_NS, entries=entries)
    if kind == "bad_utf8":
        body, _end = fix.next_message(data, 0)
        assert body is not None
        fields = [
            (tag, b"\xff\xfe" if tag == fix.TAG_SYMBOL else value) for tag, value in fix.parse_fields(body)
        ]
        data = fix.encode_message(fields)
    items = [data]
    if index % 5 == 4:
        jumped = fix.encode_market_data(
            source_seq=seq + JUMP, symbol="POISON", event_time_ns=_EVENT_NS, entries=[]
        )
        items.insert(0, jumped)
    return items


def corrupt(message: bytes) -> bytes:
    """Return a copy of a FIX message whose checksum is wrong (so readers count it malformed)."""
    head, trailer = message[:-7], message[-7:]  # trailer is b"10=NNN\x01"
    wrong = (int(trailer[3:6]) + 1) % 256
    return head + b"10=%03d\x01" % wrong


def garbage(rng: random.Random) -> bytes:
    """Bytes that can never contain ``8=FIX`` (lowercase letters and SOH)."""
    return bytes(rng.choice(b"abcdefghij\x01") for _ in range(rng.randint(8, 40)))


def plan_frames(
    messages: Sequence[GeneratedMessage],
    *,
    stream_count: int,
    batch: int,
    malformed_every: int,
    generated_before: int,
    rng: random.Random,
    poison_every: int = 0,
) -> tuple[list[tuple[int, bytes]], int]:
    """Group due messages into frames per stream, injecting malformed content.

    Every ``malformed_every``-th message overall (counting from ``generated_before``)
    brings one malformed item: alternately a garbage frame of its own, or a
    corrupted copy of the message placed just before it in its frame.

    Args:
        messages: in global order.
        stream_count: number of streams.
        batch: maximum FIX messages (valid ones) per frame.
        malformed_every: 0 for none.
        poison_every: every this many messages one is replaced by :func:`poison` (0: none);
            poison counts as malformed in the result.
        generated_before: messages generated before these (for the injection cadence).
        rng: the source of garbage bytes.

    Returns:
        ``(frames, malformed)``: ``(stream_index, payload)`` in send order and how many malformed items.
    """
    pending: list[list[bytes]] = [[] for _ in range(stream_count)]
    counts = [0] * stream_count
    frames: list[tuple[int, bytes]] = []
    malformed = 0
    for offset, msg in enumerate(messages):
        number = generated_before + offset + 1
        if poison_every and number % poison_every == 0:
            malformed += 1
            pending[msg.stream].extend(poison(msg, number // poison_every - 1))
            counts[msg.stream] += 1
            continue
        if malformed_every and number % malformed_every == 0:
            malformed += 1
            if (number // malformed_every) % 2:
                # Flush first, so each stream's byte sequence does not depend on frame boundaries.
                if pending[msg.stream]:
                    frames.append((msg.stream, b"".join(pending[msg.stream])))
                    pending[msg.stream], counts[msg.stream] = [], 0
                frames.append((msg.stream, garbage(rng)))
            else:
                pending[msg.stream].append(corrupt(msg.data))
        pending[msg.stream].append(msg.data)
        counts[msg.stream] += 1
        if counts[msg.stream] >= batch:
            frames.append((msg.stream, b"".join(pending[msg.stream])))
            pending[msg.stream], counts[msg.stream] = [], 0
    frames += [(stream, b"".join(parts)) for stream, parts in enumerate(pending) if parts]
    return frames, malformed
