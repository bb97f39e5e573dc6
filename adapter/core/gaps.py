"""Source gaps in a group: was it everybody's, or did one adapter miss what another has?

Theory of operation
-------------------
Every adapter of a channel reads the same source stream, so most gaps in it
are *common*: the source skipped a number, or sent a message nobody could
read in its place. A common gap changes nothing: every adapter passes it the
same way, numbering stays identical, and nobody should step down, throttle or
distrust its state because of it. A *local* gap is one adapter's alone (its
connection dropped frames, it was stopped): the others have the messages,
and that adapter's numbering and state are wrong from the gap on.

Nobody can tell the two apart alone, so the group finds out:

* **The active** that finds source messages ``first..last`` missing converts
  nothing past them (the message after the gap and the rest of its frame
  wait, as at a session fence) and asks (:class:`~adapter.core.syncbus.GapQuery`)
  the in-sync backups heard lately. Each answers once it has passed the gap,
  with whether it numbered any of those messages. One that did gets the role
  (:class:`~adapter.core.syncbus.Handover`): its line already carries them
  under the right ``msg_seq``. When every backup asked says no, or after
  :data:`ANSWER_TIMEOUT_S`, the gap is common and the active numbers on. With
  no in-sync backup to ask, the gap is everybody's that matters.
* **A backup** that finds a gap keeps numbering (its output waits at its gate
  anyway) but publishes nothing past the gap and stands in no election until
  the gap is *settled*: common if the active asked about the same messages,
  or if the active's first report past the gap gives the same ``msg_seq`` as
  ours (every message that changes the state gets a ``msg_seq``, so the same
  numbering after the gap means the active converted none of what we missed);
  local if the report shows other numbering, or names a position we never saw.
  A local gap is handled as before: the backup's output from the gap on is
  discarded and its state repaired by a snapshot.

A quarantined message with a readable ``source_seq`` is no gap at all: every
adapter skips it alike. Pure: no clock, no socket; times come in as arguments.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

__all__ = [
    "ANSWER_TIMEOUT_S",
    "ASK_RECENT_S",
    "BackupGaps",
    "Gap",
    "GapQuery",
    "QueryVerdict",
    "Settlement",
    "decide",
]

ANSWER_TIMEOUT_S: Final = 0.2  # the active waits this long at most for its backups' answers
ASK_RECENT_S: Final = 0.25  # the in-sync backups heard this lately are asked
KNOWN_GAPS: Final = 16  # the active's recent gaps a backup remembers


@dataclass(frozen=True, slots=True)
class Gap:
    """Source messages ``first..last`` (both inclusive) that did not arrive."""

    first: int
    last: int

    def __post_init__(self) -> None:
        if not 0 < self.first <= self.last:
            raise ValueError(f"a gap needs 0 < first <= last, got {self.first}..{self.last}")

    def __str__(self) -> str:
        return f"{self.first}..{self.last}"

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def covers(self, other: Gap) -> bool:
        """Whether every message of ``other`` is missing here too."""
        return self.first <= other.first and other.last <= self.last


class QueryVerdict(enum.Enum):
    """What the active does about its gap now."""

    WAIT = "wait"  # answers are still due
    COMMON = "common"  # every backup asked misses them too: number on
    TIMED_OUT = "timed_out"  # not every backup answered in time: number on
    HAND_OVER = "hand_over"  # a backup has them: it takes the role


@dataclass(frozen=True, slots=True)
class GapQuery:
    """The active's open question about one gap.

    Attributes:
        gap: the missing source messages.
        opened_at: when it was asked (the core's monotonic clock).
        waiting: the backups whose answer it waits for.
        answers: adapter -> whether it numbered any message of the gap.
    """

    gap: Gap
    opened_at: float
    waiting: frozenset[int]
    answers: Mapping[int, bool] = field(default_factory=dict)

    def answered(self, adapter: int, has_messages: bool) -> GapQuery:
        """This query with one more answer."""
        return replace(self, answers={**self.answers, adapter: has_messages})


def decide(query: GapQuery, *, now: float, live: Iterable[int]) -> tuple[QueryVerdict, int | None]:
    """Decide about an open gap query.

    Args:
        query: the open query.
        now: the monotonic clock.
        live: the backups still heard lately (one that went silent is not waited for).

    Returns:
        The verdict, and for ``HAND_OVER`` the adapter that takes the role (the lowest
        number among those that have the messages, so every replay of the answers
        picks the same one).
    """
    keepers = sorted(adapter for adapter, has in query.answers.items() if has)
    if keepers:
        return QueryVerdict.HAND_OVER, keepers[0]
    pending = (query.waiting & frozenset(live)) - query.answers.keys()
    if not pending:
        return QueryVerdict.COMMON, None
    if now - query.opened_at > ANSWER_TIMEOUT_S:
        return QueryVerdict.TIMED_OUT, None
    return QueryVerdict.WAIT, None


class Settlement(enum.Enum):
    """What the active's word says about a backup's own gap."""

    OPEN = "open"  # nothing known yet
    COMMON = "common"  # the active missed the same messages (or converted none of them)
    LOCAL = "local"  # the active has messages we missed


class BackupGaps:
    """A backup's side: its own unsettled gap, the active's recent gaps, the answers it owes.

    Args:
        known: how many of the active's recent gaps to remember.
    """

    __slots__ = ("pending", "_known", "_owed")

    def __init__(self, *, known: int = KNOWN_GAPS) -> None:
        self.pending: Gap | None = None  # our own gap, not settled yet
        self._known: deque[Gap] = deque(maxlen=known)  # gaps the active asked about
        self._owed: deque[Gap] = deque(maxlen=known)  # queries we have not answered yet

    def __repr__(self) -> str:
        return f"<BackupGaps [pending={self.pending}, known={len(self._known)}, owed={len(self._owed)}]>"

    def on_own_gap(self, gap: Gap) -> Settlement:
        """We found ``gap``: common at once if the active asked about it, else open (pending)."""
        if any(known.covers(gap) for known in self._known):
            return Settlement.COMMON
        pending = self.pending
        # Two gaps before the active's next word are judged as one (what lies between them
        # counts as missed too: the safe side, at worst a snapshot too many).
        self.pending = (
            gap if pending is None else Gap(min(gap.first, pending.first), max(gap.last, pending.last))
        )
        return Settlement.OPEN

    def on_query(self, gap: Gap) -> Settlement:
        """The active asks about ``gap``: remember it (we may reach it later), owe an answer."""
        self._known.append(gap)
        if gap not in self._owed:
            self._owed.append(gap)
        if self.pending is not None and gap.covers(self.pending):
            self.pending = None
            return Settlement.COMMON
        return Settlement.OPEN

    def on_report(self, *, at: int, same_numbering: bool | None) -> Settlement:
        """The active's report at source position ``at`` was compared with our stream.

        Args:
            at: the reported source position.
            same_numbering: whether our msg_seq there is the active's (``None``: we never
                saw that position, or have not reached it yet).
        """
        gap = self.pending
        if gap is None or at < gap.first:
            return Settlement.OPEN
        if at <= gap.last:
            # The active reports a position we never saw: it has messages we missed.
            self.pending = None
            return Settlement.LOCAL
        if same_numbering is None:
            return Settlement.OPEN
        self.pending = None
        return Settlement.COMMON if same_numbering else Settlement.LOCAL

    def due_answers(self, *, position: int) -> list[Gap]:
        """The owed answers we can give now that we converted up to ``position``."""
        due = [gap for gap in self._owed if gap.last <= position]
        for gap in due:
            self._owed.remove(gap)
        return due

    def forget(self) -> None:
        """Our state was replaced (snapshot) or we changed role: nothing is pending or owed."""
        self.pending = None
        self._owed.clear()
