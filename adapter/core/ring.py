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
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any, Final

from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.errors import ConversionError
from feedha.proto import fix

__all__ = ["MAX_RING_BYTES", "SourceRing"]

MAX_RING_BYTES: Final = 64 * 1024 * 1024  # the most frame bytes kept (the newest frame is always kept)


class SourceRing:
    """The newest source frames holding at least ``size`` converted messages, within ``max_bytes``.

    The frames are kept in *runs*, as they were added: one frame from :meth:`add`, a source
    pump's whole call from :meth:`extend`. The count bound drops whole runs, so keeping and
    dropping cost the same for a run of one frame or of thousands, and the ring may hold up
    to one run more than ``size`` needs. The byte bound drops single frames, oldest first,
    so it holds whatever the runs are.

    Args:
        size: how many converted messages to keep (at least, while the bytes allow).
        max_bytes: the most frame bytes to keep (the newest frame is kept whatever its size).
    """

    __slots__ = ("_runs", "_frames", "_count", "_size", "_bytes", "_max_bytes")

    def __init__(self, size: int, *, max_bytes: int = MAX_RING_BYTES) -> None:
        # Each run: [frames, start, messages, bytes]; the frames before ``start`` are gone (None).
        self._runs: deque[list[Any]] = deque()
        self._frames = 0
        self._count = 0
        self._size = size
        self._bytes = 0
        self._max_bytes = max_bytes

    def __repr__(self) -> str:
        return f"<SourceRing [frames={self._frames}, messages={self._count}, bytes={self._bytes}]>"

    def add(self, frame: bytes, converted: int) -> None:
        """Keep ``frame``, from which ``converted`` messages were converted."""
        self._runs.append([[(frame, converted)], 0, converted, len(frame)])
        self._frames += 1
        self._count += converted
        self._bytes += len(frame)
        self._trim()

    def extend(self, frames: list[tuple[bytes, int]], converted: int, held: int) -> None:
        """Keep several ``(frame, converted)``, oldest first, as one run; the ring takes ``frames``.

        ``converted`` and ``held`` are the sums of their counts and of their frames' lengths
        (the source pump counts them as it goes). The ring clears the slots of the frames it
        drops for the byte bound, so a list handed over is the ring's alone.
        """
        if not frames:
            return
        self._runs.append([frames, 0, converted, held])
        self._frames += len(frames)
        self._count += converted
        self._bytes += held
        self._trim()

    def frames(self) -> Iterator[tuple[bytes, int]]:
        """The kept ``(frame, converted)``, oldest first."""
        for frames, start, _count, _held in self._runs:
            yield from islice(frames, start, None)

    def _trim(self) -> None:
        runs, size = self._runs, self._size
        while len(runs) > 1 and self._count - runs[0][2] >= size:  # a whole run beyond the count bound
            gone = runs.popleft()
            self._frames -= len(gone[0]) - gone[1]
            self._count -= gone[2]
            self._bytes -= gone[3]
        while self._bytes > self._max_bytes and self._frames > 1:  # oldest frame first, to the byte bound
            run = runs[0]
            frames, start = run[0], run[1]
            frame, converted = frames[start]
            frames[start] = None  # its bytes are freed now, not when the whole run goes
            run[1], run[2], run[3] = start + 1, run[2] - converted, run[3] - len(frame)
            if run[1] == len(frames):
                runs.popleft()
            self._frames -= 1
            self._count -= converted
            self._bytes -= len(frame)

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
        for frame, _count in self.frames():
            for body in split(frame)[0]:
                try:
                    msg = parse(body)
                except ConversionError:
                    continue  # skipped when it arrived too
                if last < msg.source_seq <= upto and wanted(msg.source_seq):
                    found.append(msg)
                    last = msg.source_seq
        return found
