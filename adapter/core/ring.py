"""The recent source frames an adapter keeps, to replay after adopting a snapshot behind it.

A backup that asked for a snapshot may receive one taken at a source
position it has already passed. It then adopts the snapshot's values and
re-applies the messages it converted since, which it re-parses from the
frames kept here. Pure.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.errors import ConversionError
from feedha.proto import fix

__all__ = ["SourceRing"]


class SourceRing:
    """The newest source frames holding at least ``size`` converted messages.

    Args:
        size: how many converted messages to keep (at least).
    """

    __slots__ = ("_frames", "_count", "_size")

    def __init__(self, size: int) -> None:
        self._frames: deque[tuple[bytes, int]] = deque()
        self._count = 0
        self._size = size

    def __repr__(self) -> str:
        return f"<SourceRing [frames={len(self._frames)}, messages={self._count}]>"

    def add(self, frame: bytes, converted: int) -> None:
        """Keep ``frame``, from which ``converted`` messages were converted."""
        frames = self._frames
        frames.append((frame, converted))
        self._count += converted
        while self._count - frames[0][1] >= self._size:
            self._count -= frames.popleft()[1]

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
