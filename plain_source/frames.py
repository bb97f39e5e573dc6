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

POISON_KINDS: Final = (
    "count_mismatch",
    "oversize_symbol",
    "nan_price",
    "seq_jump",
    "bad_utf8",
    "huge_price",
    "negative_size",
    "overflow",
    "bad_number",
)
JUMP: Final = 10**12  # how far a poison jump message jumps
_EVENT_NS: Final = 1_790_000_000_000_000_000


def poison_message(kind: str, message: bytes, source_seq: int) -> bytes:
    """Poison of ``kind`` in place of ``message``, a well-formed message numbered ``source_seq``.

    Every kind is something a hostile or broken source sends in place of a
    normal message, and that no adapter can publish:

    ==================  =====================================================
    ``count_mismatch``  ``268=65535`` with one entry
    ``oversize_symbol`` a 70,000-byte symbol (past a block's 65,525 bytes)
    ``nan_price``       ``270=nan``
    ``seq_jump``        numbered :data:`JUMP` past its place; the stream goes on
                        where it was
    ``bad_utf8``        a symbol that is not UTF-8
    ``huge_price``      a 200,000-digit price (a message past the length
                        field's six digits: unreadable as a whole)
    ``negative_size``   a 20-digit negative size
    ``overflow``        two trades of 2**62 (the volume would leave int64)
    ``bad_number``      a size of 10**40
    ==================  =====================================================

    Raises:
        ValueError: an unknown kind.
    """
    if kind == "overflow":
        big = fix.SourceEntry(fix.ENTRY_TRADE, "1.00", 2**62)
        return fix.encode_market_data(
            source_seq=source_seq, symbol="POISON", event_time_ns=_EVENT_NS, entries=[big, big]
        )
    rewrites: dict[str, tuple[int, bytes]] = {
        "count_mismatch": (fix.TAG_NO_ENTRIES, b"65535"),
        "oversize_symbol": (fix.TAG_SYMBOL, b"P" * 70_000),
        "nan_price": (fix.TAG_PRICE, b"nan"),
        "seq_jump": (fix.TAG_SEQ, b"%d" % (source_seq + JUMP)),
        "bad_utf8": (fix.TAG_SYMBOL, b"\xff\xfe"),
        "huge_price": (fix.TAG_PRICE, b"1" * 200_000),
        "negative_size": (fix.TAG_SIZE, b"-" + b"9" * 20),
        "bad_number": (fix.TAG_SIZE, b"%d" % 10**40),
    }
    if kind not in rewrites:
        raise ValueError(f"unknown poison kind {kind!r} (one of {', '.join(POISON_KINDS)})")
    tag, value = rewrites[kind]
    return fix.replace_field(message, tag, value)


def poison(msg: GeneratedMessage, index: int) -> list[bytes]:
    """Poison in place of ``msg``: a message with its source_seq that no adapter can publish.

    The kind rotates with ``index`` (:data:`POISON_KINDS`); every fifth poison
    also brings, before it, a message numbered :data:`JUMP` past it (a
    source_seq no stream could reach), which must not move anybody's numbering.
    """
    kind = POISON_KINDS[index % len(POISON_KINDS)]
    items = [poison_message(kind, msg.data, msg.source_seq)]
    if index % 5 == 4:
        jumped = fix.encode_market_data(
            source_seq=msg.source_seq + JUMP, symbol="POISON", event_time_ns=_EVENT_NS, entries=[]
        )
        items.insert(0, jumped)
    return items


def poison_kind_counts(poisoned: int) -> dict[str, int]:
    """How many of each kind :func:`poison` made in ``poisoned`` poisons (the kinds rotate)."""
    counts = dict.fromkeys(POISON_KINDS, poisoned // len(POISON_KINDS))
    for kind in POISON_KINDS[: poisoned % len(POISON_KINDS)]:
        counts[kind] += 1
    return counts


def corrupt(message: bytes) -> bytes:
    """Return a copy of a FIX message whose checksum is wrong (so readers count it malformed)."""
    head = message[: -fix.TRAILER_SIZE]
    wrong = (fix.checksum(head) + 1) % 256
    return head + fix.TRAILER.fill(checksum=b"%03d" % wrong)


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
