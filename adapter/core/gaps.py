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
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from feedha.adapter.core import syncbus
from feedha.adapter.core.actions import SendSync
from feedha.adapter.core.sequencer import ReportVerdict
from feedha.adapter.core.steps import Apply, Distrust, Emit, ReleaseGap, Step
from feedha.adapter.core.sync_types import GapPending, GapSettled, HandOver, HandoverHeard, Role, SyncState

logger = logging.getLogger(__name__)

__all__ = [
    "ANSWER_TIMEOUT_S",
    "ASK_RECENT_S",
    "BackupGaps",
    "Gap",
    "GapDesk",
    "GapView",
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

    __slots__ = ("pending", "_known", "owed")

    def __init__(self, *, known: int = KNOWN_GAPS) -> None:
        self.pending: Gap | None = None  # our own gap, not settled yet
        self._known: deque[Gap] = deque(maxlen=known)  # gaps the active asked about
        self.owed: deque[Gap] = deque(maxlen=known)  # questions not answered yet

    def __repr__(self) -> str:
        return f"<BackupGaps [pending={self.pending}, known={len(self._known)}, owed={len(self.owed)}]>"

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
        if gap not in self.owed:
            self.owed.append(gap)
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
        due = [gap for gap in self.owed if gap.last <= position]
        for gap in due:
            self.owed.remove(gap)
        return due

    def forget(self) -> None:
        """Our state was replaced (snapshot) or we changed role: nothing is pending or owed."""
        self.pending = None
        self.owed.clear()


@dataclass(frozen=True, slots=True)
class GapView:
    """What the gap desk needs to know of the core at one moment.

    Attributes:
        sync: the sync rules' state (role, term, peers).
        now: the monotonic clock.
        position: the last source message the pipeline took.
        trusted: whether our line could carry what we numbered (confirmed, nothing suspect).
        recorded: whether we numbered any source message of ``first..last`` (the sequencer's history).
        sender: this adapter on the sync bus.
    """

    sync: SyncState
    now: float
    position: int
    trusted: bool
    recorded: Callable[[int, int], bool]
    sender: syncbus.Sender


_SAME_NUMBERING: Final = {
    ReportVerdict.MATCH: True,
    ReportVerdict.DIGEST_MISMATCH: True,
    ReportVerdict.NUMBERING_MISMATCH: False,
}


class GapDesk:
    """One adapter's part in telling common gaps from local ones (see the module docstring).

    Args:
        adapter: this adapter's number (for the logs).
    """

    def __init__(self, adapter: int) -> None:
        self._adapter = adapter
        self.backup = BackupGaps()  # our own unsettled gap and the active's questions
        self.query: GapQuery | None = None  # the active's open question
        self._passed: Gap | None = None  # the active: the gap the group answered (number on)
        self._local: Gap | None = None  # a gap that is ours alone (we handed the role over for it)
        self.counts = {"asked": 0, "common": 0, "local": 0, "handed_over": 0}

    def __repr__(self) -> str:
        return f"<GapDesk [query={self.query}, {self.backup!r}, {self.counts}]>"

    @property
    def pending(self) -> Gap | None:
        """A backup's own gap, not settled yet."""
        return self.backup.pending

    def status(self) -> dict[str, Any]:
        """The counters and what is open, for the adapter's status."""
        pending = self.backup.pending
        return {"gaps": dict(self.counts), "gap_pending": None if pending is None else str(pending)}

    # ---- the pipeline found a gap --------------------------------------------------------

    def on_gap(self, view: GapView, gap: Gap, *, jump: bool) -> tuple[bool, list[Step]]:
        """Missing source messages ``gap``: whether the pipeline holds there, and the steps."""
        role = view.sync.role
        if role is Role.ACTIVE:
            return self._active_gap(view, gap, jump=jump)
        if role is Role.BACKUP:
            return False, self._backup_gap(gap)
        return False, []

    def _active_gap(self, view: GapView, gap: Gap, *, jump: bool) -> tuple[bool, list[Step]]:
        if jump or gap == self._passed:
            self._passed = None  # a believed jump is everybody's; an answered gap is passed
            return False, []
        waiting = _backups(view, in_sync_only=True)
        if not waiting:
            return False, []  # nobody in sync to ask: the gap is everybody's that matters
        self.query = GapQuery(gap, view.now, waiting)
        self.counts["asked"] += 1
        logger.info(
            "adapter %d: source messages %s missing; asking backups %s before numbering past them",
            self._adapter,
            gap,
            sorted(waiting),
        )
        return True, [Emit(SendSync(syncbus.GapQuery(view.sender, gap.first, gap.last)))]

    def _backup_gap(self, gap: Gap) -> list[Step]:
        local = self._local
        if local is not None and local.covers(gap):
            self._local = None  # we handed the role over for this gap: it is ours alone
            return self._settled(Settlement.LOCAL, gap)
        if self.backup.on_own_gap(gap) is Settlement.OPEN:
            return [Apply(GapPending())]
        self.counts["common"] += 1
        return []

    # ---- a backup: the active's word ------------------------------------------------------

    def on_report(self, *, at: int, verdict: ReportVerdict) -> list[Step]:
        """The active's report at ``at`` was compared with our stream: does it settle our gap?

        Same msg_seq past the gap: the active converted none of what we missed (every message
        that changes the state gets one), so our state lacks nothing.
        """
        gap = self.backup.pending
        if gap is None:
            return []
        return self._settled(self.backup.on_report(at=at, same_numbering=_SAME_NUMBERING.get(verdict)), gap)

    def on_arrival(self, *, at: int, renumbered: bool) -> list[Step]:
        """We reached ``at``, a position the active had reported: the same as a report there."""
        gap = self.backup.pending
        if gap is None:
            return []
        return self._settled(self.backup.on_report(at=at, same_numbering=not renumbered), gap)

    def covered(self, at: int) -> list[Step]:
        """A snapshot of the active's state at ``at`` was adopted: it makes a gap before it moot."""
        gap = self.backup.pending
        if gap is None or at < gap.last:
            return []
        self.backup.pending = None
        return [Apply(GapSettled(common=True))]

    def _settled(self, settlement: Settlement, gap: Gap) -> list[Step]:
        if settlement is Settlement.COMMON:
            self.counts["common"] += 1
            return [Apply(GapSettled(common=True))]
        if settlement is Settlement.LOCAL:
            self.counts["local"] += 1
            logger.info(
                "adapter %d: missed source messages %s that the active has; repairing from a snapshot",
                self._adapter,
                gap,
            )
            return [Distrust(gap.first - 1), Apply(GapSettled(common=False, missing=gap.size))]
        return []

    def on_message(
        self,
        view: GapView,
        msg: syncbus.GapQuery | syncbus.GapAnswer | syncbus.Handover,
        *,
        from_active: bool,
    ) -> list[Step]:
        """A gap query (from our active), an answer (to our query), or a handover heard on the sync bus."""
        if isinstance(msg, syncbus.Handover):
            return [Apply(HandoverHeard(msg.sender.adapter, msg.sender.term, msg.target, msg.reason))]
        if isinstance(msg, syncbus.GapAnswer):
            query = self.query
            if (
                query is not None
                and view.sync.role is Role.ACTIVE
                and msg.sender.term == view.sync.term
                and (msg.first, msg.last) == (query.gap.first, query.gap.last)
            ):
                self.query = query.answered(msg.sender.adapter, msg.has_messages)
            return []
        if not from_active:
            return []
        steps: list[Step] = []
        if self.backup.on_query(Gap(msg.first, msg.last)) is Settlement.COMMON:
            self.counts["common"] += 1
            steps.append(Apply(GapSettled(common=True)))
        return steps + self.answers(view)

    def answers(self, view: GapView) -> list[Step]:
        """A backup's answers it owes and can give now that it passed the gaps asked about.

        It offers the messages only if its line can carry them: confirmed, nothing of its own unsettled.
        """
        if view.sync.role is not Role.BACKUP:
            return []
        steps: list[Step] = []
        for gap in self.backup.due_answers(position=view.position):
            has = view.trusted and view.recorded(gap.first, gap.last)
            steps.append(Emit(SendSync(syncbus.GapAnswer(view.sender, gap.first, gap.last, has))))
        return steps

    # ---- the active: deciding ----------------------------------------------------------------

    def decide(self, view: GapView) -> list[Step]:
        """The active's open query, looked at again (an answer came, or time passed)."""
        query = self.query
        if query is None:
            return []
        if view.sync.role is not Role.ACTIVE:
            self.query = None  # no longer the active: what waited is converted as a backup
            return [ReleaseGap()]
        verdict, target = decide(query, now=view.now, live=_backups(view, in_sync_only=False))
        if verdict is QueryVerdict.WAIT:
            return []
        self.query = None
        if verdict is QueryVerdict.HAND_OVER and target is not None:
            self.counts["handed_over"] += 1
            self._local = query.gap
            reason = f"missed source messages {query.gap} that backup {target} has"
            return [Apply(HandOver(target, reason)), ReleaseGap()]
        if verdict is QueryVerdict.TIMED_OUT:
            logger.warning(
                "adapter %d: no answer about source messages %s from every backup in %.2fs; numbering on",
                self._adapter,
                query.gap,
                ANSWER_TIMEOUT_S,
            )
        self.counts["common"] += 1
        self._passed = query.gap
        return [ReleaseGap()]

    def deadline(self) -> float | None:
        """When the open query times out (``None``: none open)."""
        return None if self.query is None else self.query.opened_at + ANSWER_TIMEOUT_S

    def forget(self) -> None:
        """The role changed: what a backup had pending or owed is moot."""
        self.backup.forget()


def _backups(view: GapView, *, in_sync_only: bool) -> frozenset[int]:
    now = view.now
    return frozenset(
        peer.adapter
        for peer in view.sync.peers.values()
        if peer.role is Role.BACKUP
        and now - peer.last_seen <= ASK_RECENT_S
        and (peer.in_sync or not in_sync_only)
    )
