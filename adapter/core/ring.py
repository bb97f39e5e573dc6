"""The recent source frames an adapter keeps, to replay after adopting a snapshot behind it.

A backup that asked for a snapshot may receive one taken at a source
position it has already passed. It then adopts the snapshot's values and
re-applies the messages it converted since, which it re-parses from the
frames kept here. Bounded twice: by the messages it must hold and by the
bytes it may hold (a frame of one message padded with megabytes of garbage
must not make a few thousand of them a heap of gigabytes); a snapshot older
than what is kept is refused and a newer one awaited. Pure.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from operator import itemgetter
from typing import Final

from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.errors import ConversionError
from feedha.proto import fix

__all__ = ["MAX_RING_BYTES", "SourceRing"]

MAX_RING_BYTES: Final = 64 * 1024 * 1024  # the most frame bytes kept (the newest frame is always kept)


class SourceRing:
    """The newest source frames holding at least ``size`` converted messages, within ``max_bytes``.

    Args:
        size: how many converted messages to keep (at least, while the bytes allow).
        max_bytes: the most frame bytes to keep (the newest frame is kept whatever its size).
    """

    __slots__ = ("_frames", "_count", "_size", "_bytes", "_max_bytes")

    def __init__(self, size: int, *, max_bytes: int = MAX_RING_BYTES) -> None:
        self._frames: deque[tuple[bytes, int]] = deque()
        self._count = 0
        self._size = size
        self._bytes = 0
        self._max_bytes = max_bytes

    def __repr__(self) -> str:
        return f"<SourceRing [frames={len(self._frames)}, messages={self._count}, bytes={self._bytes}]>"

    def add(self, frame: bytes, converted: int) -> None:
        """Keep ``frame``, from which ``converted`` messages were converted."""
        self._frames.append((frame, converted))
        self._count += converted
        self._bytes += len(frame)
        self._trim()

    def extend(self, frames: list[tuple[bytes, int]]) -> None:
        """Keep several ``(frame, converted)``, oldest first: what :meth:`add` of each keeps.

        One pass for a source pump's run (tens of frames a turn at low rates): trimming once
        at the end drops exactly the frames trimming after each would (a frame the rules
        drop stays droppable as newer frames come).
        """
        self._frames.extend(frames)
        self._count += sum(map(itemgetter(1), frames))
        self._bytes += sum(map(len, map(itemgetter(0), frames)))
        self._trim()

    def _trim(self) -> None:
        frames, count, held = self._frames, self._count, self._bytes
        size, max_bytes = self._size, self._max_bytes
        while len(frames) > 1 and (count - frames[0][1] >= size or held > max_bytes):
            gone, converted = frames.popleft()
            count -= converted
            held -= len(gone)
        self._count, self._bytes = count, held

    def messages(
        self,
        parse: Callable[[bytes], SourceMessage],
        split: Callable[[bytes], tuple[list[bytes], int]] = fix.split_messages,
        *,
        after: int,
        upto: int,
        wanted: Callable[[int], bool],
    ) -> list[SourceMessage]:
        """The kept messages with ``after < source_seq <= upto`` that ``wanted`` accepts, in order."""
        found: list[SourceMessage] = []
        last = after
        for frame, _count in self._frames:
            for body in split(frame)[0]:
                try:
                    msg = parse(body)
                except ConversionError:
                    continue  # skipped when it arrived too
                if last < msg.source_seq <= upto and wanted(msg.source_seq):
                    found.append(msg)
                    last = msg.source_seq
        return found
