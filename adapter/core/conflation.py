"""Conflation intervals: the group's boundaries and what each interval holds (pure).

docs/architecture.md, "Conflated lines", has the design. An interval is named
by the msg_seq of its boundary, not by a time: interval *k* holds, for every
symbol that changed in ``(B[k-1], B[k]]``, its latest value at ``B[k]``, so
it is a pure function of the numbered stream and the same on every adapter.

* :class:`ConflationBook` keeps the changes since the last closed boundary,
  each with its msg_seq, so an adapter that has numbered past a boundary
  (a backup ahead of the active's proposal) still closes the interval at the
  boundary exactly. It is bounded: past ``max_pending`` changes it drops
  what it holds and covers no interval until it is reset at a boundary.
* :class:`IntervalKeeper` is the protocol: the active proposes ``(k, B[k],
  T[k], C[k])`` every interval of its clock, commits *k* once every backup
  heard lately acknowledged it, and publishes committed intervals in order
  (it closes each interval as it proposes it: it has numbered through the
  boundary, and the next proposal's first number depends on the count); a
  backup acknowledges what it hears and publishes a committed interval once
  its numbering reached the boundary; a promoted backup publishes the
  intervals it holds in order, then proposes the next.

Nothing here reads a clock or touches a socket: times come in as arguments.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

__all__ = ["Boundary", "ConflationBook", "Interval", "IntervalKeeper"]

logger = logging.getLogger(__name__)

ACK_WINDOW_S: Final = 0.25  # a backup heard within this long must have acknowledged (as for sessions)
MAX_PENDING: Final = 1_000_000  # changes a book holds before it gives up the interval

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Boundary:
    """Interval ``k`` ends after ``msg_seq``; proposed at ``time_ns``; numbered from ``first_conf_seq``."""

    k: int
    msg_seq: int
    time_ns: int
    first_conf_seq: int


@dataclass(frozen=True, slots=True)
class Interval(Generic[V]):
    """What interval ``boundary.k`` carries: ``(symbol, value)`` in symbol order."""

    boundary: Boundary
    entries: tuple[tuple[str, V], ...]

    @property
    def next_conf_seq(self) -> int:
        """The first conflated number of the interval after this one."""
        return self.boundary.first_conf_seq + len(self.entries)


@dataclass(slots=True)
class ConflationBook(Generic[V]):
    """The changes since the last closed boundary, each with its msg_seq."""

    max_pending: int = MAX_PENDING
    _pending: list[tuple[int, str, V]] = field(default_factory=list)
    _closed_through: int = 0
    overflowed: bool = False

    def note(self, msg_seq: int, symbol: str, value: V) -> None:
        """Symbol ``symbol`` took ``value`` at ``msg_seq`` (msg_seqs increase)."""
        if self.overflowed:
            return
        if len(self._pending) >= self.max_pending:
            logger.warning(
                "conflation book over %d changes: no interval until the next reset", self.max_pending
            )
            self._pending.clear()
            self.overflowed = True
            return
        self._pending.append((msg_seq, symbol, value))

    def close(self, boundary: Boundary) -> Interval[V] | None:
        """Interval ``boundary.k``: each symbol's last value up to the boundary (``None``: cannot cover it).

        Changes after the boundary stay for the next interval.
        """
        if self.overflowed or boundary.msg_seq < self._closed_through:
            return None
        cut = 0
        latest: dict[str, V] = {}
        for cut, (msg_seq, symbol, value) in enumerate(self._pending, start=1):  # noqa: B007
            if msg_seq > boundary.msg_seq:
                cut -= 1
                break
            latest[symbol] = value
        del self._pending[:cut]
        self._closed_through = boundary.msg_seq
        return Interval(boundary, tuple(sorted(latest.items())))

    def reset(self, boundary_seq: int, changes: Iterable[tuple[int, str, V]] = ()) -> None:
        """Start again after ``boundary_seq`` (an overflow, a restart), with the changes since it."""
        self._pending = [c for c in changes if c[0] > boundary_seq]
        self._closed_through = boundary_seq
        self.overflowed = False


@dataclass(slots=True)
class IntervalKeeper:
    """The boundary protocol of one adapter (see the module docstring).

    Args:
        interval_s: the interval's length on the active's monotonic clock.
    """

    interval_s: float
    proposed: list[Boundary] = field(default_factory=list)  # not yet committed, oldest first
    committed: list[Boundary] = field(default_factory=list)  # committed, not yet published
    _acks: dict[int, dict[Hashable, float]] = field(default_factory=dict)  # k -> peer -> when
    _next_k: int = 1
    _next_conf_seq: int = 1
    _last_proposal_at: float | None = None
    _last_boundary_seq: int = 0
    published_k: int = 0

    def tick(self, *, now: float, wall_ns: int, published_seq: int) -> Boundary | None:
        """The active: propose the next boundary when an interval has passed since the last."""
        if self._last_proposal_at is not None and now - self._last_proposal_at < self.interval_s:
            return None
        self._last_proposal_at = now
        if published_seq <= self._last_boundary_seq:
            return None  # nothing new since the last boundary: no interval
        self._last_boundary_seq = published_seq
        boundary = Boundary(self._next_k, published_seq, wall_ns, self._next_conf_seq)
        self._next_k += 1
        self.proposed.append(boundary)
        self._acks[boundary.k] = {}
        return boundary

    def on_ack(self, peer: Hashable, k: int, *, now: float) -> None:
        """The active: backup ``peer`` holds boundary ``k`` (and every earlier one)."""
        for boundary in self.proposed:
            if boundary.k <= k:
                self._acks.setdefault(boundary.k, {})[peer] = now

    def commit(self, heard: dict[Hashable, float], *, now: float) -> list[Boundary]:
        """The active: the proposals every backup heard within :data:`ACK_WINDOW_S` acknowledged, in order.

        The caller publishes them (the active closed each interval when it proposed it).
        """
        live = {peer for peer, at in heard.items() if now - at <= ACK_WINDOW_S}
        done: list[Boundary] = []
        while self.proposed and live <= set(self._acks.get(self.proposed[0].k, {})):
            boundary = self.proposed.pop(0)
            self._acks.pop(boundary.k, None)
            done.append(boundary)
        return done

    def on_report(self, proposals: Iterable[Boundary], committed_k: int) -> int:
        """A backup: the active's report names these boundaries and its last committed ``k``; the ack."""
        known = {b.k for b in self.proposed} | {b.k for b in self.committed}
        for boundary in proposals:
            if boundary.k > self.published_k and boundary.k not in known:
                self.proposed.append(boundary)
        self.proposed.sort(key=lambda b: b.k)
        while self.proposed and self.proposed[0].k <= committed_k:
            self.committed.append(self.proposed.pop(0))
        newest = max((b.k for b in (*self.proposed, *self.committed)), default=self.published_k)
        return newest

    def due(self, *, numbered_seq: int) -> list[Boundary]:
        """The committed boundaries this adapter's numbering has reached, in order: publish them."""
        out: list[Boundary] = []
        while self.committed and self.committed[0].msg_seq <= numbered_seq:
            out.append(self.committed.pop(0))
        return out

    def closed(self, interval: Interval[V]) -> None:
        """Interval ``interval`` was closed (the active: right after proposing it; a backup: when due).

        The next proposal's first number follows it.
        """
        self.published_k = interval.boundary.k
        self._next_k = max(self._next_k, interval.boundary.k + 1)
        self._last_boundary_seq = max(self._last_boundary_seq, interval.boundary.msg_seq)
        self._next_conf_seq = max(self._next_conf_seq, interval.next_conf_seq)

    def skipped(self, boundary: Boundary) -> None:
        """Interval ``boundary.k`` was passed without being closed here (this adapter could not cover it)."""
        self.published_k = max(self.published_k, boundary.k)
        self._next_k = max(self._next_k, boundary.k + 1)
        self._last_boundary_seq = max(self._last_boundary_seq, boundary.msg_seq)

    def next_proposal(self) -> float | None:
        """When the active may propose next (monotonic clock; ``None``: at once)."""
        at = self._last_proposal_at
        return None if at is None else at + self.interval_s

    def promote(self) -> list[Boundary]:
        """A backup becomes active: every boundary it holds becomes its to publish, in order.

        A boundary the old active proposed may have been committed (and seen) without this
        adapter hearing so; publishing it again is harmless (subscribers drop copies).
        """
        self.committed += self.proposed
        self.proposed = []
        self.committed.sort(key=lambda b: b.k)
        if self.committed:
            self._next_k = self.committed[-1].k + 1
            self._last_boundary_seq = self.committed[-1].msg_seq
        held, self.committed = self.committed, []
        return held
