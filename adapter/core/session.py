"""The trading day: sessions, their schedule, and how a group agrees on a boundary.

Theory of operation
-------------------
A channel's stream is cut into *sessions* (ids 1, 2, ...). At a boundary every
symbol's daily fields start again (:func:`~feedha.adapter.conversion.state.next_session`),
the session id moves on -- the conversion-state digest covers it -- and the
line carries an *end-of-session block*: a msg_seq of its own, in a packet
with flag bit 2, journaled as a session-boundary record.

Every line must roll at the same msg_seq, so the boundary must sit at the same
source position on every adapter of the group. Only the active decides one
(its schedule came, or an operator asked), and it cannot know how far each
backup has converted, so the group agrees in two steps:

1. *Propose*: the active stops converting after its last source message F
   (the *fence*: later messages wait where they are) and names the proposal
   in every report it sends (``StreamState.proposed_*``). A backup that hears
   it stops after ``max(F, its own position)`` and acknowledges
   (:class:`~feedha.adapter.core.syncbus.SessionAck`) with its position.
2. *Commit*: once every backup heard lately (:data:`ACK_RECENT_S`) has
   acknowledged with a position at or before F, the active rolls right after
   F and goes on; its reports name the new session. A backup that is already
   past F makes the active move the fence to its position first (everyone
   stops there instead), so no adapter ever has to undo a conversion.
   A backup rolls when a report names the new session and it stands at F.

Why it is safe: a backup publishes only what the active confirmed, except
while the active is silent (:mod:`~feedha.adapter.core.gate`), when it
releases what it numbered as the active would have. A backup that knows of
a proposal has converted nothing past F, so what it releases is the same on
every line whatever the outcome. The active commits only when every backup
heard lately knows of the proposal, and reports reach a backup in order
(one that was stopped reads the proposal before anything it could release).
A backup that was promoted while holding a proposal carries it out (the old
active may have committed), which is always safe: nobody converted past F.
A backup that finds the group in a session it did not roll into (it was
down, or too far ahead) holds its output and repairs its state by snapshot,
as for any other divergence (``SessionMissed``).

A proposal that no backup answers for :data:`PROPOSAL_TIMEOUT_S` is withdrawn
(reports stop naming it; backups go on), and a scheduled end is tried again
after :data:`RETRY_S`. Pure: times come in as arguments.
"""

from __future__ import annotations

import datetime as dt
import enum
import zoneinfo
from dataclasses import dataclass, field, replace
from typing import Final

__all__ = [
    "ACK_RECENT_S",
    "FIRST_SESSION",
    "RECORD_SESSION_BOUNDARY",
    "Boundary",
    "PROPOSAL_TIMEOUT_S",
    "RETRY_S",
    "Proposal",
    "Session",
    "SessionKeeper",
    "SessionReason",
    "SessionSchedule",
    "Verdict",
]

# The journal's record flag of an end-of-session record (adapter.journal.format.RECORD_SESSION_BOUNDARY;
# the core imports no journal module, and a test keeps the two equal).
RECORD_SESSION_BOUNDARY: Final = 0x02
ACK_RECENT_S: Final = 0.25  # a backup heard this lately must acknowledge a proposal before it commits
PROPOSAL_TIMEOUT_S: Final = 1.0  # a proposal not agreed by then is withdrawn
RETRY_S: Final = 1.0  # a withdrawn scheduled end is proposed again this much later
ACK_RESEND_S: Final = 0.1  # a backup acknowledges again while the proposal stays open
_NS: Final = 1_000_000_000
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class SessionReason(enum.IntEnum):
    """Why a session ended (the values are ``feedha.v1.SessionReason``'s)."""

    SCHEDULE = 1
    OPERATOR = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSchedule:
    """A daily session end: a time of day in a time zone.

    Args:
        end: the local time of day the session ends.
        zone: an IANA time zone name (``America/New_York``, ``UTC``).

    Raises:
        ValueError: an unknown time zone.

    A local time that does not exist on a day (the hour skipped when clocks go
    forward) is taken with the offset from before the change, i.e. an hour
    later on the wall clock; one that exists twice (clocks go back) is taken
    the first time.
    """

    end: dt.time
    zone: str
    _tz: zoneinfo.ZoneInfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        shown = self.zone if len(self.zone) <= 64 else self.zone[:64] + "..."
        try:
            tz = zoneinfo.ZoneInfo(self.zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
            raise ValueError(f"unknown time zone {shown!r} (an IANA name such as America/New_York)") from exc
        object.__setattr__(self, "_tz", tz)

    @classmethod
    def parse(cls, end: str, zone: str = "UTC") -> SessionSchedule:
        """Build a schedule from ``HH:MM`` or ``HH:MM:SS`` and a zone name.

        Raises:
            ValueError: a malformed time of day or an unknown zone, named.
        """
        try:
            parsed = dt.time.fromisoformat(end)
        except ValueError:
            parsed = None
        if parsed is None or parsed.tzinfo is not None or end.count(":") not in (1, 2):
            raise ValueError(f"session end must be a local time of day HH:MM[:SS], got {end!r}")
        return cls(end=parsed, zone=zone)

    def next_end_after(self, start_ns: int) -> int:
        """The first scheduled end strictly after ``start_ns`` (ns since the epoch)."""
        local = dt.datetime.fromtimestamp(start_ns / _NS, tz=self._tz).date()
        for days in range(-1, 3):
            day = local + dt.timedelta(days=days)
            since = dt.datetime.combine(day, self.end, tzinfo=self._tz) - _EPOCH
            end_ns = (since.days * 86_400 + since.seconds) * _NS + since.microseconds * 1000
            if end_ns > start_ns:
                return end_ns
        raise AssertionError("a daily time always comes within three days")  # pragma: no cover

    def describe(self) -> str:
        return f"{self.end.isoformat()} {self.zone}"


@dataclass(frozen=True, slots=True)
class Session:
    """The session an adapter is in.

    Attributes:
        id: 1, 2, ... (grows at every boundary).
        after_source_seq: it began right after this source message (0: the first session).
        boundary_msg_seq: the end-of-session block that began it (0: none).
        start_ns: when it began, ns since the epoch (0: not known yet).
        reason: why the session before it ended (a ``SessionReason``; 0 for the first).
    """

    id: int
    after_source_seq: int = 0
    boundary_msg_seq: int = 0
    start_ns: int = 0
    reason: int = 0


FIRST_SESSION: Final = Session(1)


@dataclass(frozen=True, slots=True)
class Boundary:
    """A boundary to carry out: leave session ``ended`` for ``started`` right after ``after_source_seq``."""

    ended: int
    started: int
    after_source_seq: int
    time_ns: int
    reason: SessionReason


@dataclass(slots=True)
class Proposal:
    """A boundary the active proposes: roll into ``session`` right after ``after_source_seq``.

    Attributes:
        session: the id of the session that begins.
        after_source_seq: the fence: no adapter converts a later source message until it is settled.
        time_ns: the boundary's time (the scheduled end, or when the operator asked).
        reason: why the session ends.
        opened_at: when the proposal was made (the core's monotonic clock).
        inherited: proposed by an active that is gone; its successor must carry it out
            (the old active may have committed it), never withdraw it.
        acks: adapter -> the position it acknowledged the current fence with.
    """

    session: int
    after_source_seq: int
    time_ns: int
    reason: SessionReason
    opened_at: float
    inherited: bool = False
    acks: dict[int, int] = field(default_factory=dict)

    def boundary(self) -> Boundary:
        """The boundary this proposal carries out."""
        return Boundary(self.session - 1, self.session, self.after_source_seq, self.time_ns, self.reason)


class Verdict(enum.Enum):
    """What the active does with its proposal now."""

    WAIT = "wait"
    MOVE = "move"  # a backup is past the fence: the fence moves to it
    COMMIT = "commit"
    WITHDRAW = "withdraw"


class SessionKeeper:
    """One adapter's session, and the proposal it makes (active) or holds (backup).

    Args:
        schedule: the daily end (``None``: sessions end only when an operator says so).
    """

    __slots__ = (
        "schedule",
        "session",
        "proposal",
        "held",
        "committed",
        "retry_at",
        "_acked",
        "rolled",
        "withdrawn",
        "missed",
    )

    def __init__(self, schedule: SessionSchedule | None = None) -> None:
        self.schedule = schedule
        self.session = FIRST_SESSION
        self.proposal: Proposal | None = None  # the active's own
        self.held: Proposal | None = None  # the active's proposal as a backup knows it
        self.committed: Session | None = None  # a backup: roll into this when at the fence
        self.retry_at = 0.0
        self._acked: tuple[int, int, float] | None = None  # (session, after, when) last acknowledged
        self.rolled = self.withdrawn = self.missed = 0

    def __repr__(self) -> str:
        s = self.session
        pending = self.proposal or self.held
        what = "none" if pending is None else f"{pending.session}@{pending.after_source_seq}"
        return f"<SessionKeeper [session={s.id}, after={s.after_source_seq}, proposal={what}]>"

    # ---- the active -------------------------------------------------------------------

    def due(self, *, wall_ns: int, now: float) -> int | None:
        """The scheduled end that has come (its time), or ``None``."""
        if self.schedule is None or self.proposal is not None or now < self.retry_at:
            return None
        start = self.session.start_ns
        if not start:
            return None
        end = self.schedule.next_end_after(start)
        return end if wall_ns >= end else None

    def propose(self, *, after: int, time_ns: int, reason: SessionReason, now: float) -> Proposal:
        """Open a proposal (or return the open one): roll into the next session after ``after``."""
        if self.proposal is None:
            self.proposal = Proposal(self.session.id + 1, after, time_ns, reason, now)
        return self.proposal

    def on_ack(self, adapter: int, *, session: int, after: int, position: int) -> None:
        """A backup acknowledged ``session`` at fence ``after`` from ``position``."""
        proposal = self.proposal
        if proposal is not None and session == proposal.session and after == proposal.after_source_seq:
            proposal.acks[adapter] = position

    def verdict(self, *, recent: set[int], at_fence: bool, now: float) -> Verdict:
        """Decide on the open proposal.

        Args:
            recent: the backups heard within :data:`ACK_RECENT_S`.
            at_fence: whether this adapter has converted everything up to the fence.
            now: the monotonic clock.
        """
        proposal = self.proposal
        if proposal is None:
            return Verdict.WAIT
        if any(position > proposal.after_source_seq for position in proposal.acks.values()):
            return Verdict.MOVE
        agreed = all(adapter in proposal.acks for adapter in recent)
        if at_fence and (agreed or (proposal.inherited and now - proposal.opened_at > PROPOSAL_TIMEOUT_S)):
            return Verdict.COMMIT
        if now - proposal.opened_at > PROPOSAL_TIMEOUT_S and not proposal.inherited:
            return Verdict.WITHDRAW
        return Verdict.WAIT

    def move_fence(self) -> int:
        """Move the fence to the furthest acknowledged position; returns it."""
        proposal = self.proposal
        assert proposal is not None
        proposal.after_source_seq = max(proposal.after_source_seq, *proposal.acks.values())
        proposal.acks.clear()
        return proposal.after_source_seq

    def withdraw(self, *, now: float) -> Proposal | None:
        """Give the open proposal up; a scheduled end is tried again after :data:`RETRY_S`."""
        proposal, self.proposal = self.proposal, None
        if proposal is not None:
            self.withdrawn += 1
            self.retry_at = now + RETRY_S
        return proposal

    def commit(self, *, boundary_msg_seq: int) -> tuple[Proposal, Session]:
        """The active rolls: returns the proposal and the session that begins."""
        proposal, self.proposal = self.proposal, None
        assert proposal is not None
        return proposal, self.begin(proposal, boundary_msg_seq=boundary_msg_seq)

    def begin(self, proposal: Proposal, *, boundary_msg_seq: int) -> Session:
        """Enter the session ``proposal`` opens (active or backup)."""
        self.session = Session(
            proposal.session,
            proposal.after_source_seq,
            boundary_msg_seq,
            proposal.time_ns,
            int(proposal.reason),
        )
        self.held = self.committed = None
        self._acked = None
        self.rolled += 1
        return self.session

    def inherit(self, *, now: float) -> Proposal | None:
        """Promoted while holding a proposal: it is ours now, to carry out."""
        held, self.held = self.held, None
        if held is not None and self.proposal is None:
            self.proposal = replace(held, opened_at=now, inherited=True, acks={})
        return self.proposal

    def step_down(self) -> None:
        """Demoted: an open proposal becomes one we hold, for the new active's reports to settle."""
        if self.proposal is not None:
            self.held, self.proposal = replace(self.proposal, acks={}), None

    # ---- a backup -------------------------------------------------------------------

    def should_ack(self, *, session: int, after: int, now: float) -> bool:
        """Whether to acknowledge this proposal now (first time, or again after :data:`ACK_RESEND_S`)."""
        acked = self._acked
        if acked is not None and acked[:2] == (session, after) and now - acked[2] < ACK_RESEND_S:
            return False
        self._acked = (session, after, now)
        return True

    def hold(self, proposal: Proposal) -> None:
        """A backup learned of the active's proposal."""
        self.held = proposal

    def release(self) -> Proposal | None:
        """The active withdrew the proposal we held."""
        held, self.held = self.held, None
        self._acked = None
        return held

    def adopt(self, session: Session) -> None:
        """Take the active's session as it is (a snapshot, or its start time in a report)."""
        self.session = session
        self.held = self.committed = None
        self._acked = None
