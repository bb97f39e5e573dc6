"""What one channel delivered lately, to check later copies against.

Every line carries the same stream, so most blocks a subscriber receives are
copies of ``msg_seq``\\ s it already delivered. A copy with the identity
``(source_stream, source_seq)`` that was delivered is a duplicate; another
identity is a conflict; a ``msg_seq`` no longer remembered (or never
delivered: lost) is late. :class:`DeliveredRing` keeps the identities of the
last ``window`` ``msg_seq``\\ s delivered, in three lists indexed by ``msg_seq
% window``, so a run of copies is checked with three C-level slice
comparisons. :class:`RecentPackets` keeps recent packets whose blocks were
all first copies: a byte-identical copy from another line is all duplicates,
with no block walk. Pure.
"""

from __future__ import annotations

from collections import deque
from typing import Final

from feedha.proto.wire import HEADER_SIZE

__all__ = ["DeliveredRing", "RecentPackets"]

RECENT_PACKETS: Final = 4096


class DeliveredRing:
    """The identities of the last ``window`` ``msg_seq``\\ s delivered.

    Args:
        window: how many are remembered (``ArbiterConfig.conflict_window``).
    """

    __slots__ = ("window", "seqs", "streams", "source_seqs")

    def __init__(self, window: int) -> None:
        self.window = window
        self.seqs = [-1] * window  # the msg_seq each slot remembers
        self.streams = [0] * window
        self.source_seqs = [0] * window

    def identity(self, seq: int) -> tuple[int, int] | None:
        """The ``(source_stream, source_seq)`` delivered at ``seq``; ``None`` if not remembered."""
        slot = seq % self.window
        if self.seqs[slot] != seq:
            return None
        return self.streams[slot], self.source_seqs[slot]

    def remember(self, seq: int, stream: int, source_seq: int) -> None:
        """``seq`` was delivered with this identity."""
        slot = seq % self.window
        self.seqs[slot] = seq
        self.streams[slot] = stream
        self.source_seqs[slot] = source_seq

    def remember_run(self, first: int, streams: list[int], source_seqs: list[int]) -> None:
        """``first``, ``first + 1`` ... were delivered with these identities (slice assignments)."""
        window = self.window
        count = len(streams)
        if count == 1:  # a packet a message, as below saturation: no slices to build
            slot = first % window
            self.seqs[slot], self.streams[slot], self.source_seqs[slot] = first, streams[0], source_seqs[0]
            return
        if count > window:  # only the last `window` stay
            cut = count - window
            first, streams, source_seqs, count = first + cut, streams[cut:], source_seqs[cut:], window
        start = first % window
        head = min(count, window - start)  # a run that wraps is cut in two
        self.seqs[start : start + head] = range(first, first + head)
        self.streams[start : start + head] = streams[:head]
        self.source_seqs[start : start + head] = source_seqs[:head]
        if head < count:
            rest = count - head
            self.seqs[:rest] = range(first + head, first + count)
            self.streams[:rest] = streams[head:]
            self.source_seqs[:rest] = source_seqs[head:]

    def holds_run(self, first: int, streams: list[int], source_seqs: list[int]) -> bool:
        """Every one of ``first``, ``first + 1`` ... is remembered with exactly these identities."""
        start = first % self.window
        if len(streams) == 1:  # a packet a message, as below saturation: no slices to build
            return (
                self.seqs[start] == first
                and self.source_seqs[start] == source_seqs[0]
                and self.streams[start] == streams[0]
            )
        stop = start + len(streams)
        return (
            stop <= self.window
            and self.seqs[start:stop] == list(range(first, first + len(streams)))
            and self.source_seqs[start:stop] == source_seqs
            and self.streams[start:stop] == streams
        )


class RecentPackets:
    """Recent packets whose blocks were all first copies, by their first ``msg_seq``."""

    __slots__ = ("_packets", "_order")

    def __init__(self) -> None:
        self._packets: dict[int, bytes] = {}
        self._order: deque[int] = deque()  # oldest first; at most RECENT_PACKETS

    def remember(self, first: int, packet: bytes) -> None:
        """Every block of ``packet`` (which starts at ``first``) was a first copy."""
        if first not in self._packets:
            self._order.append(first)
            if len(self._order) > RECENT_PACKETS:
                del self._packets[self._order.popleft()]
        self._packets[first] = packet

    def is_copy(self, first: int, packet: bytes) -> bool:
        """``packet`` has the blocks of a remembered packet that starts at ``first``, byte for byte."""
        known = self._packets.get(first)
        # startswith at an offset compares in place: one slice, not two. The header may differ.
        return (
            known is not None
            and len(known) == len(packet)
            and known.startswith(packet[HEADER_SIZE:], HEADER_SIZE)
        )
