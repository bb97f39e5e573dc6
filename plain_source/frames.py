"""Framing plans: the model's messages cut into ZeroMQ payloads, with malformed content injected.

Each payload is one or more FIX messages back to back. Garbage frames and
corrupted copies never consume a ``source_seq``. Pure: the caller passes the
random source of the garbage bytes and sends the frames.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from plain_source.model import GeneratedMessage


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
