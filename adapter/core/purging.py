"""Purges across an adapter group: the active decides, the backups learn, the operator hears back.

Theory of operation
-------------------
An operator purges messages that the delayed line has not sent yet (the
persistent-queue seed's "purge a pending message by its id", and its
cancel-all). Every line of the group must agree, so one adapter decides:

1. **The active decides** (:meth:`PurgeDesk.on_command`). It refuses what it
   cannot honour, saying why: it is not the active; the range holds
   ``msg_seq`` 0 or runs past its journal; everything in it is purged already;
   the first message is at or before the delayed *frontier* (published on a
   delayed line -- its own, or a backup's as their health reports say -- or
   due within the margin); its delayed tailer lags so the frontier is unknown;
   too many purges come too fast (a token bucket) or its book is full. What
   it accepts gets the next ``purge_id`` and goes into its journal (a purge
   record) and, at once, to the backups (``Purges`` on the sync bus).
2. **The backups learn.** A backup adds what the active sends, journals it and
   acknowledges (``PurgeAck``); every report of the active carries its highest
   ``purge_id``, so a backup that missed one -- a lost message, a restart --
   sees it, asks (the ack doubles as the request) and is sent the rest. A
   backup's delayed line holds back while it lacks a purge the active holds,
   so no line ever sends what the group purged. The active's word is final: a
   purge a backup holds beyond the active's highest id (accepted by an active
   the group no longer follows: a partition, a stall) is withdrawn, and one the
   active holds differently is replaced -- journaled both ways.
3. **The operator hears back** once every live backup acknowledged, or after
   ``ack_timeout_s`` with the ones that did not named (:class:`CommandDone`).
   A backup promoted after the reply holds the purge; a restarted adapter
   finds it in its journal or learns it from the active before its delayed
   line sends anything.

Pure: the time and the core's view come in with each call; actions go out.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from feedha.adapter.core.actions import Action, CommandDone, JournalControl, SendSync, Status
from feedha.adapter.core.commands import Purge
from feedha.adapter.core.purge import PURGE_RECORD_FLAGS, PurgeBook, PurgeEntry, encode_purge
from feedha.adapter.core.sync_types import Role
from feedha.adapter.core.syncbus import MAX_PURGES_PER_MESSAGE, Health, PurgeAck, Purges, Sender, StreamState
from feedha.proto.token_bucket import TokenBucket

logger = logging.getLogger(__name__)

__all__ = ["ACK_TIMEOUT_S", "PurgeContext", "PurgeCounters", "PurgeDesk"]

ACK_TIMEOUT_S: Final = 1.0  # the longest an operator waits for the backups' acknowledgements
RESEND_S: Final = 0.05  # the least time between two catch-up sends (active) or requests (backup)
PURGES_PER_S: Final = 10.0  # purges the active accepts per second, sustained ...
PURGE_BURST: Final = 20.0  # ... and at once
MAX_PENDING: Final = 64  # replies waiting for acknowledgements at most (then: answered unconfirmed)


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeContext:
    """What the desk needs of the core at one moment.

    Attributes:
        now: the monotonic clock.
        wall_ns: the wall clock, ns since the epoch.
        sender: this adapter on the sync bus (adapter, term, role).
        role: its role; ``deciding`` while it does not know it yet.
        deciding: still deciding its role at start-up.
        active: the adapter it believes active (``None``: none heard).
        journal_last: the last msg_seq in its journal (``None``: no journal).
        frontier: its delayed line's frontier (``None``: unknown, the tailer lags; 0: nothing yet).
        delayed_published: the last msg_seq its delayed line sent (0: none).
        has_delayed: whether it serves a delayed line at all.
        live_peers: the group members heard lately and not failed.
    """

    now: float
    wall_ns: int
    sender: Sender
    role: Role
    deciding: bool
    active: int | None
    journal_last: int | None
    frontier: int | None
    delayed_published: int
    has_delayed: bool
    live_peers: frozenset[int]


@dataclass(slots=True)
class PurgeCounters:
    """What the desk has done since start (status and metrics)."""

    accepted: int = 0  # purges this adapter accepted as the active
    applied: int = 0  # purges learned from the active
    withdrawn: int = 0  # purges dropped because the active did not hold them (a deposed active's)
    late: int = 0  # learned purges that named a msg_seq this adapter's delayed line had sent already
    resent: int = 0  # catch-up messages sent to backups that lacked purges
    refused: dict[str, int] = field(default_factory=dict)  # by reason

    def as_dict(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "applied": self.applied,
            "withdrawn": self.withdrawn,
            "late": self.late,
            "resent": self.resent,
            "refused": dict(self.refused),
        }


@dataclass(slots=True)
class _Pending:
    command_id: str
    entry: PurgeEntry
    deadline: float
    waiting: set[int]
    confirmed: list[int] = field(default_factory=list)


class PurgeDesk:
    """One adapter's side of the group's purges (see the module docstring).

    Args:
        now: the monotonic clock at start-up.
        ack_timeout_s: how long a reply waits for the backups' acknowledgements.
        margin_s: how long before it is due a message stops being purgeable (for the messages).
    """

    def __init__(self, *, now: float, ack_timeout_s: float = ACK_TIMEOUT_S, margin_s: float = 1.0) -> None:
        self.book = PurgeBook()
        self.counters = PurgeCounters()
        self._ack_timeout_s = ack_timeout_s
        self._margin_s = margin_s
        self._rate = TokenBucket(PURGES_PER_S, PURGE_BURST, now=now)
        self._pending: list[_Pending] = []
        self._acks: dict[int, int] = {}  # peer -> the highest purge_id it holds (its word)
        self._delayed: dict[int, tuple[int, float]] = {}  # peer -> (its delayed line's last msg_seq, when)
        self._sent_to: dict[int, float] = {}  # peer -> when its catch-up was last sent
        self.active_purge_seq: int | None = None  # the active's highest purge_id, as last reported
        self._asked_at = float("-inf")

    def __repr__(self) -> str:
        return (
            f"<PurgeDesk [{self.book!r}, pending={len(self._pending)}, active_seq={self.active_purge_seq}]>"
        )

    # ---- recovery ----------------------------------------------------------------------

    def restore(self, entries: Iterable[PurgeEntry]) -> int:
        """Apply the purges recovery found (checkpoint, then journal, in order); how many changed."""
        return len(self.book.add_all(entries))

    # ---- the active decides ---------------------------------------------------------------

    def on_command(self, command: Purge, ctx: PurgeContext, out: list[Action]) -> dict[str, Any]:
        """Accept or refuse a purge; the reply (``deferred``: a :class:`CommandDone` follows)."""
        entry_or_refusal = self._decide(command, ctx)
        if isinstance(entry_or_refusal, dict):
            reason = str(entry_or_refusal["reason"])
            self.counters.refused[reason] = self.counters.refused.get(reason, 0) + 1
            logger.warning("purge refused (%s): %s", reason, entry_or_refusal["error"])
            return entry_or_refusal
        entry = entry_or_refusal
        self.book.add(entry)
        self.counters.accepted += 1
        out.append(JournalControl(PURGE_RECORD_FLAGS, ctx.wall_ns, encode_purge(entry)))
        out.append(SendSync(Purges(ctx.sender, (entry,))))
        out.append(Status("purge", {**entry.as_dict(), "count": entry.count}))
        logger.info(
            "purge %d accepted: msg_seq %d..%d (%s, by %s)",
            *(entry.purge_id, entry.first_msg_seq, entry.last_msg_seq, entry.reason, entry.issued_by or "-"),
        )
        waiting = {peer for peer in ctx.live_peers if self._acks.get(peer, 0) < entry.purge_id}
        reply = _accepted(entry)
        if not waiting or not command.command_id or len(self._pending) >= MAX_PENDING:
            return {**reply, "confirmed": sorted(ctx.live_peers - waiting), "unconfirmed": sorted(waiting)}
        self._pending.append(_Pending(command.command_id, entry, ctx.now + self._ack_timeout_s, waiting))
        return {**reply, "deferred": True}

    def _decide(self, command: Purge, ctx: PurgeContext) -> PurgeEntry | dict[str, Any]:
        if ctx.deciding or ctx.role is not Role.ACTIVE:
            who = "nobody yet" if ctx.active is None else f"adapter {ctx.active}"
            return _refusal("NOT_ACTIVE", f"adapter {ctx.sender.adapter} is not the active ({who} is)")
        if not ctx.has_delayed or ctx.journal_last is None:
            return _refusal(
                "NO_DELAYED_LINE", "this adapter serves no delayed line (--delayed-line, --journal)"
            )
        if not self._rate.try_take(now=ctx.now):
            return _refusal("TOO_MANY", f"too many purges: at most {PURGES_PER_S:g} a second")
        if self.book.is_full:
            return _refusal("BOOK_FULL", f"this channel holds {self.book.limit} purges, the most it keeps")
        if ctx.frontier is None:
            return _refusal("CATCHING_UP", "the delayed line is catching up with its journal; try again")
        frontier = max([ctx.frontier, *self._peer_frontiers(ctx)])
        first, last = command.first, command.last
        if command.all_pending:
            first, last = frontier + 1, ctx.journal_last
            if first > last:
                return _refusal(
                    "NOTHING_PENDING", "nothing is pending on the delayed line", frontier=frontier
                )
        elif last > ctx.journal_last:
            return _refusal(
                "BEYOND_END",
                f"msg_seq {first}..{last} runs past the last message published ({ctx.journal_last})",
                journal_last=ctx.journal_last,
            )
        if first <= frontier:
            return _refusal(
                "ALREADY_DELIVERED",
                f"msg_seq {first} was already delivered on the delayed line (or is due within "
                f"{self._margin_s:g}s): only messages after {frontier} can still be purged",
                frontier=frontier,
            )
        if self.book.is_all_purged(first, last):
            return _refusal("ALREADY_PURGED", f"msg_seq {first}..{last} are purged already")
        term = ctx.sender.term
        return PurgeEntry(
            purge_id=self.book.highest_id + 1,
            first_msg_seq=first,
            last_msg_seq=last,
            time_ns=ctx.wall_ns,
            reason=command.reason,
            issued_by=command.issued_by,
            term=term,
        )

    def _peer_frontiers(self, ctx: PurgeContext) -> list[int]:
        # What the backups' health says their delayed lines sent (a report is at most a health
        # interval old; the margin covers what they sent since).
        return [seq for peer, (seq, _at) in self._delayed.items() if peer in ctx.live_peers]

    # ---- the backups learn -------------------------------------------------------------------

    def on_stream_state(self, msg: StreamState, ctx: PurgeContext, out: list[Action]) -> None:
        """The active's report: how many purges it holds; drop what it lacks, ask for what we lack."""
        self.active_purge_seq = msg.purge_seq
        for purge_id in [i for i in range(msg.purge_seq + 1, self.book.highest_id + 1) if i in self.book]:
            dropped = self.book.withdraw(purge_id)
            if dropped is not None:
                self.counters.withdrawn += 1
                logger.warning(
                    "purge %d withdrawn: the active holds purges up to %d only", purge_id, msg.purge_seq
                )
                withdrawal = dataclasses.replace(dropped, withdrawn=True, time_ns=ctx.wall_ns)
                out.append(JournalControl(PURGE_RECORD_FLAGS, ctx.wall_ns, encode_purge(withdrawal)))
        if self.book.known_through < msg.purge_seq:
            self._ask(ctx, out)

    def on_purges(self, msg: Purges, ctx: PurgeContext, out: list[Action]) -> None:
        """Purges from the active we follow: hold, journal and acknowledge the new ones."""
        sender = msg.sender
        if sender.role is not Role.ACTIVE or sender.adapter != ctx.active or ctx.role is Role.ACTIVE:
            return  # only the active we follow decides
        for entry in msg.entries:
            if entry.withdrawn or not self.book.add_all((entry,)):
                continue
            self.counters.applied += 1
            out.append(JournalControl(PURGE_RECORD_FLAGS, ctx.wall_ns, encode_purge(entry)))
            if entry.first_msg_seq <= ctx.delayed_published:
                self.counters.late += 1
                logger.error(
                    "purge %d names msg_seq %d..%d, but this delayed line sent up to %d already",
                    *(entry.purge_id, entry.first_msg_seq, entry.last_msg_seq, ctx.delayed_published),
                )
        out.append(SendSync(PurgeAck(ctx.sender, self.book.known_through)))
        self._asked_at = ctx.now

    def _ask(self, ctx: PurgeContext, out: list[Action]) -> None:
        if ctx.now - self._asked_at >= RESEND_S:
            self._asked_at = ctx.now
            out.append(SendSync(PurgeAck(ctx.sender, self.book.known_through)))

    def may_publish_delayed(self, ctx: PurgeContext) -> bool:
        """Whether this adapter's delayed line may send now: it holds every purge the group holds."""
        if ctx.deciding or ctx.role is Role.FAILED:
            return False
        if ctx.role is Role.ACTIVE:
            return True
        return self.active_purge_seq is not None and self.book.known_through >= self.active_purge_seq

    # ---- the active hears the acknowledgements -------------------------------------------------

    def on_ack(self, msg: PurgeAck, ctx: PurgeContext, out: list[Action]) -> None:
        """A peer holds purges up to ``known_through``: settle replies, send it what it lacks."""
        peer = msg.sender.adapter
        self._acks[peer] = max(self._acks.get(peer, 0), msg.known_through)
        self._settle(out)
        if ctx.role is not Role.ACTIVE or msg.known_through >= self.book.highest_id:
            return
        if ctx.now - self._sent_to.get(peer, float("-inf")) < RESEND_S:
            return
        self._sent_to[peer] = ctx.now
        missing = self.book.after(msg.known_through, limit=MAX_PURGES_PER_MESSAGE)
        if missing:
            self.counters.resent += 1
            out.append(SendSync(Purges(ctx.sender, tuple(missing))))

    def on_health(self, msg: Health, now: float, out: list[Action]) -> None:
        """A peer's health: its acknowledged purges and its delayed line's position."""
        peer = msg.sender.adapter
        self._acks[peer] = max(self._acks.get(peer, 0), msg.purge_seq)
        self._delayed[peer] = (msg.delayed_msg_seq, now)
        if self._pending:
            self._settle(out)

    def has_work(self, role: Role) -> bool:
        """Whether :meth:`on_tick` would do anything (asked every turn: no context built)."""
        behind = (self.active_purge_seq or 0) > self.book.known_through
        return bool(self._pending) or (role is Role.BACKUP and behind)

    def on_tick(self, ctx: PurgeContext, out: list[Action]) -> None:
        """Answer the replies whose acknowledgements did not all come in time; keep asking if behind."""
        if self._pending:
            for pending in [p for p in self._pending if ctx.now >= p.deadline]:
                self._pending.remove(pending)
                self._done(pending, out)
        if ctx.role is Role.BACKUP and (self.active_purge_seq or 0) > self.book.known_through:
            self._ask(ctx, out)

    def _settle(self, out: list[Action]) -> None:
        for pending in list(self._pending):
            for peer in list(pending.waiting):
                if self._acks.get(peer, 0) >= pending.entry.purge_id:
                    pending.waiting.discard(peer)
                    pending.confirmed.append(peer)
            if not pending.waiting:
                self._pending.remove(pending)
                self._done(pending, out)

    def _done(self, pending: _Pending, out: list[Action]) -> None:
        reply = {
            **_accepted(pending.entry),
            "confirmed": sorted(pending.confirmed),
            "unconfirmed": sorted(pending.waiting),
        }
        out.append(CommandDone(pending.command_id, reply))

    def status(self) -> dict[str, Any]:
        """The desk's counters and book, for the adapter's status."""
        return {
            **self.counters.as_dict(),
            "held": len(self.book),
            "known_through": self.book.known_through,
            "highest_id": self.book.highest_id,
            "pending_replies": len(self._pending),
        }


def _refusal(reason: str, error: str, **fields: Any) -> dict[str, Any]:
    return {"ok": False, "reason": reason, "error": error, **fields}


def _accepted(entry: PurgeEntry) -> dict[str, Any]:
    return {"ok": True, **entry.as_dict(), "count": entry.count}
