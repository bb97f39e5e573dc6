"""``itch50`` captures: BinaryFILE files played as MoldUDP64 packets, and the chaos drill's poison.

A capture is in the BinaryFILE layout (a u16 big-endian length before every
message, as NASDAQ's sample files are; :mod:`adapter.formats.itch50.day` writes
seeded ones); message ``i`` (from 0) is sequence number ``i + 1``. Each frame
sent is one MoldUDP64 downstream packet of the messages due (at most a batch,
and never more bytes than a datagram holds), paced at a rate or as fast as
possible: never by the capture's own timestamps (a day from 03:00 to 20:05).
After the last message an end of session packet (count ``0xFFFF``) follows.
``feedha drill overload`` plays this format when no ``--format`` is given. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from feedha.adapter.formats.capture_face import Capture, CaptureFace, Chaos, check_size
from feedha.proto import moldudp64

__all__ = ["CAPTURE", "SESSION", "itch_frames", "read_itch_capture", "write_itch_capture"]

SESSION: Final = "FEEDHA"


def read_itch_capture(data: bytes) -> Capture:
    """The messages of a BinaryFILE capture (a message cut short at the end is kept, as it was).

    Raises:
        ValueError: more than :data:`~adapter.formats.capture_face.MAX_CAPTURE_BYTES`, or no
            message at all.
    """
    check_size(data)
    messages = tuple(moldudp64.read_binary_file(data))
    if not messages:
        raise ValueError("no ITCH message in the capture (BinaryFILE: u16 length, then the message)")
    return Capture(messages, 0)


def write_itch_capture(messages: Sequence[bytes]) -> bytes:
    """The BinaryFILE capture of ``messages``: each after its u16 big-endian length."""
    return b"".join(len(message).to_bytes(2, "big") + message for message in messages)


def itch_frames(messages: Sequence[bytes], first: int, end: int) -> list[bytes]:
    """Messages ``first`` to ``end - 1`` as MoldUDP64 packets, each within what a datagram holds
    (a message larger than that goes alone)."""
    frames: list[bytes] = []
    start, size = first, moldudp64.HEADER.size
    for index in range(first, end):
        grown = size + 2 + len(messages[index])
        if grown > moldudp64.MAX_PACKET_BYTES and index > start:
            frames.append(_packet(messages, start, index))
            start, grown = index, moldudp64.HEADER.size + 2 + len(messages[index])
        size = grown
    frames.append(_packet(messages, start, end))
    return frames


def _packet(messages: Sequence[bytes], first: int, end: int) -> bytes:
    return moldudp64.encode_packet(SESSION, first + 1, messages[first:end])


def _seq_of(_messages: Sequence[bytes], index: int) -> int:
    return index + 1


def _end(count: int) -> list[bytes]:
    return [moldudp64.encode_packet(SESSION, count + 1, [], count=moldudp64.END_OF_SESSION)]


def _chaos() -> Chaos:
    from feedha.adapter.formats.itch50.poison import CHAOS  # the drills' only: loaded when asked

    return CHAOS


CAPTURE: Final = CaptureFace(
    name="itch50",
    read=read_itch_capture,
    write=write_itch_capture,
    frames=itch_frames,
    seq_of=_seq_of,
    end=_end,
    chaos=_chaos,
    default_for=frozenset({"overload"}),
)
