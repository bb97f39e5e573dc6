"""The output gate: a backup's messages go out only once the active has confirmed their numbering.

Theory of operation
-------------------
Every line of a channel must carry the same ``msg_seq`` for the same source
message. The active's numbering is the channel's by definition; a backup's
is only *believed* to match it, and the belief is checked against the
active's reports (its last published position and digest, every heartbeat
interval). A backup that published what it numbered at once would publish
any divergence before the next report caught it -- the active missed source
messages the backup has, the backup was just demoted after a stall that cost
it source messages, a report moved its counter -- and a subscriber would see
two lines give one ``msg_seq`` to two different messages.

So a backup's packets and journal records wait here, in order, each with the
last source position it covers, until the sync rules *confirm* that position
(the active's report matched ours there, or a pending report matched when we
reached it); then everything up to it is released. A report that shows our
numbering or state wrong *discards* what waits: it was never sent, so it was
never seen, and the subscriber takes those messages from the other lines.
Journal records are released with their packets, so the journal holds what
the line carried and nothing else.

Two exceptions keep failover seamless:

* the active (and a backup the moment it is promoted) opens the gate: its
  numbering is the channel's, and everything waiting goes out at once;
* when the active's reports stop for longer than ``silence_s`` (it died or
  stalled), what waits goes out *provisionally*, and so does what follows,
  until a report is heard again: the backups' lines keep carrying the stream
  while the group elects a new active. Only a *trusted* gate does that: one
  confirmed since the last contradiction (an adapter still catching up, or
  one whose state a report found wrong, keeps waiting).

Held bytes are bounded (``limit_bytes``): past it the oldest held output is
dropped (counted), as a subscriber's own queue would drop it.

Pure: no clock is read; positions and byte counts come in as arguments, and what
may go out is returned (the caller turns it into actions).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

__all__ = ["DEFAULT_LIMIT_BYTES", "DEFAULT_SILENCE_S", "GateCounters", "OutputGate"]

DEFAULT_SILENCE_S: Final = 0.05  # five heartbeat intervals without a report: release provisionally
DEFAULT_LIMIT_BYTES: Final = 64 * 1024 * 1024

Item = TypeVar("Item")


@dataclass(slots=True)
class GateCounters:
    """What went through the gate since start (for status and metrics)."""

    held: int = 0  # items that had to wait for a confirmation
    released: int = 0  # held items that went out (confirmed, promoted or provisional)
    discarded: int = 0  # held items dropped because a report showed them wrong
    overflowed: int = 0  # held items dropped because too much waited
    provisional_releases: int = 0  # times the active's silence released what waited

    def as_dict(self) -> dict[str, int]:
        return {
            "held": self.held,
            "released": self.released,
            "discarded": self.discarded,
            "overflowed": self.overflowed,
            "provisional_releases": self.provisional_releases,
        }


class OutputGate(Generic[Item]):
    """Holds a backup's output until its numbering is confirmed.

    Args:
        limit_bytes: the most bytes held at once.
    """

    __slots__ = (
        "_held",
        "_held_bytes",
        "_limit",
        "confirmed",
        "is_open",
        "is_provisional",
        "is_trusted",
        "counters",
    )

    def __init__(self, *, limit_bytes: int = DEFAULT_LIMIT_BYTES) -> None:
        if limit_bytes < 1:
            raise ValueError(f"limit_bytes must be >= 1, got {limit_bytes}")
        self._held: deque[tuple[int, Item, int]] = deque()  # (last source_seq covered, item, bytes)
        self._held_bytes = 0
        self._limit = limit_bytes
        self.confirmed = 0  # the highest source position whose numbering was confirmed
        self.is_open = True  # an active's gate: nothing waits
        self.is_provisional = False  # the active went silent: nothing waits until it is heard again
        self.is_trusted = (
            False  # confirmed since the last contradiction: may go out when the active is silent
        )
        self.counters = GateCounters()

    def __repr__(self) -> str:
        state = "open" if self.is_open else "provisional" if self.is_provisional else "closed"
        return (
            f"<OutputGate [{state}, confirmed={self.confirmed}, held={len(self._held)}, "
            f"held_bytes={self._held_bytes}]>"
        )

    @property
    def held(self) -> int:
        """Items waiting."""
        return len(self._held)

    @property
    def passes(self) -> bool:
        """Whether new output goes straight out (open, or provisionally released)."""
        return self.is_open or self.is_provisional

    def covers(self, upto: int) -> bool:
        """Whether output up to source position ``upto`` may go out now."""
        return self.passes or (not self._held and upto <= self.confirmed)

    def admit(self, item: Item, upto: int, size: int) -> list[Item]:
        """Take ``item`` (covering source positions up to ``upto``): what may go out now, in order.

        Returns:
            ``[item]`` when it may go out at once, else ``[]`` (it waits).
        """
        if self.covers(upto):
            return [item]
        self._held.append((upto, item, size))
        self._held_bytes += size
        self.counters.held += 1
        while self._held_bytes > self._limit and len(self._held) > 1:
            _upto, _item, dropped = self._held.popleft()
            self._held_bytes -= dropped
            self.counters.overflowed += 1
        return []

    def confirm(self, upto: int) -> list[Item]:
        """The numbering up to ``upto`` is the active's: what waited up to there, to go out in order."""
        self.is_provisional = False
        self.is_trusted = True
        self.confirmed = max(self.confirmed, upto)
        held, released = self._held, []
        while held and held[0][0] <= self.confirmed:
            _upto, item, size = held.popleft()
            self._held_bytes -= size
            released.append(item)
        self.counters.released += len(released)
        return released

    def discard(self) -> int:
        """A report showed our numbering or state wrong: drop what waits; returns how many."""
        dropped = len(self._held)
        self._held.clear()
        self._held_bytes = 0
        self.counters.discarded += dropped
        self.is_provisional = self.is_trusted = False
        return dropped

    def discard_after(self, upto: int) -> int:
        """Drop what waits beyond source position ``upto`` (what covers only earlier ones stays)."""
        held = self._held
        kept = 0
        while kept < len(held) and held[kept][0] <= upto:
            kept += 1
        dropped = len(held) - kept
        for _ in range(dropped):
            _upto, _item, size = held.pop()
            self._held_bytes -= size
        self.counters.discarded += dropped
        self.is_provisional = False
        return dropped

    def heard(self) -> None:
        """The active was heard again: provisional release is over (confirm or discard decides)."""
        self.is_provisional = False

    def release_all(self, *, provisional: bool) -> list[Item]:
        """Everything that waits, in order (promoted, or the active went silent)."""
        if provisional:
            self.is_provisional = True
            if self._held:
                self.counters.provisional_releases += 1
        released = [item for _upto, item, _size in self._held]
        self._held.clear()
        self._held_bytes = 0
        self.counters.released += len(released)
        return released

    def open(self) -> list[Item]:
        """We are the active: everything waiting goes out, and nothing waits from now on."""
        released = self.release_all(provisional=False)
        self.is_open = True
        self.is_provisional = False
        return released

    def close(self, *, confirmed: int, trusted: bool) -> None:
        """We are a backup from now on: what comes after ``confirmed`` waits for the active's word.

        Args:
            confirmed: the source position up to which our numbering is the channel's.
            trusted: whether what follows may go out if the active falls silent
                (a demoted active's numbering is as good as any backup's).
        """
        self.is_open = False
        self.is_provisional = False
        self.is_trusted = trusted
        self.confirmed = confirmed
