"""The known-missing ``msg_seq`` ranges of one channel's stream, each with the time it was first seen.

A gap of a million messages costs one record. Ranges are opened only above
everything seen, in time order, so they are sorted by ``msg_seq`` *and* by
age: only the front one can be due for loss, and requests are due from the
front. A copy that lands in a range splits it; both parts keep its age and
whether it was asked for. A range that a retransmitted copy shrank since it
was asked for is not lost when its time comes but asked for again, its age
restarting (:meth:`Holes.retry_front`): a hole a replay service is still
filling page by page is not given up; one that stopped shrinking is. Only
the front's age restarts; the ranges behind it cannot be delivered before
it, and are judged when it is gone. Pure: the time is passed in.
"""

from __future__ import annotations

from bisect import bisect_right

__all__ = ["Hole", "Holes"]


class Hole:
    """A known-missing inclusive range, with the time it was first seen."""

    __slots__ = ("first", "last", "detected_at", "requested", "shrunk")

    def __init__(
        self, first: int, last: int, detected_at: float, requested: bool = False, shrunk: bool = False
    ) -> None:
        self.first = first
        self.last = last
        self.detected_at = detected_at
        self.requested = requested
        self.shrunk = shrunk  # a retransmitted copy landed in it since it was last asked for

    def __repr__(self) -> str:
        return f"<Hole {self.first}..{self.last} at {self.detected_at} requested={self.requested}>"


def _first(hole: Hole) -> int:
    return hole.first


class Holes:
    """The ranges, sorted (see the module docstring), and how many were opened and asked for."""

    __slots__ = ("ranges", "opened", "requests")

    def __init__(self) -> None:
        self.ranges: list[Hole] = []
        self.opened = 0  # ranges ever opened (gaps)
        self.requests = 0  # ranges ever asked for (retransmission requests)

    def __len__(self) -> int:
        return len(self.ranges)

    def open(self, first: int, last: int, now: float) -> None:
        """``first..last`` is missing since ``now`` (above every range open)."""
        self.opened += 1
        self.ranges.append(Hole(first, last, now))

    def fill(self, seq: int, *, retransmitted: bool = False) -> None:
        """``seq`` arrived (by retransmission): take it out of the range that holds it (which must exist)."""
        ranges = self.ranges
        index = 0 if ranges[0].last >= seq else bisect_right(ranges, seq, key=_first) - 1
        hole = ranges[index]
        assert hole.first <= seq <= hole.last, (seq, hole.first, hole.last)
        hole.shrunk = hole.shrunk or retransmitted
        if hole.first == hole.last:
            del ranges[index]
        elif seq == hole.first:
            hole.first += 1
        elif seq == hole.last:
            hole.last -= 1
        else:
            ranges.insert(index + 1, Hole(seq + 1, hole.last, hole.detected_at, hole.requested, hole.shrunk))
            hole.last = seq - 1

    def is_front_due(self, now: float, loss_timeout: float) -> bool:
        """The oldest range has been open for ``loss_timeout``."""
        return bool(self.ranges) and now - self.ranges[0].detected_at >= loss_timeout

    def retry_front(self, now: float) -> Hole | None:
        """The front range, asked for again from ``now`` if a retransmission shrank it since it
        was asked for (``None``: it did not; it is lost)."""
        hole = self.ranges[0]
        if not hole.shrunk:
            return None
        hole.shrunk, hole.requested, hole.detected_at = False, True, now
        self.requests += 1
        return hole

    def pop_front(self) -> Hole:
        """Remove and return the oldest (lowest) range."""
        return self.ranges.pop(0)

    def due_requests(self, now: float, fill_timeout: float) -> list[Hole]:
        """The ranges open for ``fill_timeout`` and not asked for yet; they count as asked for now."""
        due = []
        for hole in self.ranges:
            if hole.requested:
                continue
            if now - hole.detected_at < fill_timeout:
                break  # the ranges after it are younger
            hole.requested = True
            due.append(hole)
        self.requests += len(due)
        return due

    def missing(self, first: int, last: int) -> int:
        """How many of ``first..last`` are in a range."""
        return sum(
            max(0, min(hole.last, last) - max(hole.first, first) + 1)
            for hole in self.ranges
            if hole.first <= last and hole.last >= first
        )

    def next_deadline(self, fill_timeout: float, loss_timeout: float) -> float | None:
        """When the front range is due for loss or the first range not asked for is due for a request."""
        if not self.ranges:
            return None
        deadline = self.ranges[0].detected_at + loss_timeout
        for hole in self.ranges:
            if not hole.requested:
                return min(deadline, hole.detected_at + fill_timeout)
        return deadline
