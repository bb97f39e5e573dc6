"""Session boundaries inside the adapter core: the agreement of :mod:`adapter.core.session`, decided.

:class:`SessionDriver` is the core's part that handles sessions. It is called
at a few points -- the active's timer (:meth:`SessionDriver.tick`: the
schedule, and the fate of its proposal), a report of the active heard by a
backup (:meth:`SessionDriver.on_report`, before the report is compared), a
backup's acknowledgement heard by the active (:meth:`SessionDriver.on_ack`),
role changes, the operator's ``session_end``, snapshots -- each time with a
:class:`SessionView` of the core, and returns the :mod:`~adapter.core.steps`
for the core to carry out (fence the pipeline, commit the boundary, report
now, send an acknowledgement ...). The rolling itself -- state,
end-of-session block, journal record -- is the pipeline's. Pure, and it holds
no pointer to the core.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from feedha.adapter.core import syncbus
from feedha.adapter.core.actions import SendSync, Status
from feedha.adapter.core.session import (
    ACK_RECENT_S,
    Boundary,
    Proposal,
    Session,
    SessionKeeper,
    SessionReason,
    SessionSchedule,
    Verdict,
)
from feedha.adapter.core.steps import (
    Abandon,
    Apply,
    Commit,
    Emit,
    HoldAt,
    ReportNow,
    Step,
    Unfence,
    Unpublish,
)
from feedha.adapter.core.sync_types import Role, SessionMissed, SyncState

logger = logging.getLogger(__name__)

__all__ = ["SessionDriver", "SessionView"]


@dataclass(frozen=True, slots=True)
class SessionView:
    """What the session driver needs to know of the core at one moment.

    Attributes:
        sync: the sync rules' state (role, term, peers).
        now: the monotonic clock.
        wall_ns: the wall clock, ns since the epoch.
        position: the last source message the pipeline took.
        at_fence: whether the pipeline converted everything up to its fence.
        rolling: whether a committed boundary waits for the pipeline to reach it.
        checking: whether the pipeline checks a suspect jump or holds at a gap (no proposal then).
        sender: this adapter on the sync bus.
    """

    sync: SyncState
    now: float
    wall_ns: int
    position: int
    at_fence: bool
    rolling: bool
    checking: bool
    sender: syncbus.Sender

    def recent_backups(self) -> set[int]:
        """The backups heard within :data:`ACK_RECENT_S` (they must acknowledge a proposal)."""
        return {
            peer.adapter
            for peer in self.sync.peers.values()
            if peer.role is Role.BACKUP and self.now - peer.last_seen <= ACK_RECENT_S
        }

    @property
    def is_active(self) -> bool:
        return self.sync.role is Role.ACTIVE and not self.sync.deciding


class SessionDriver:
    """Sessions of one adapter core.

    Args:
        adapter: this adapter's number (for the logs).
        schedule: the daily session end (``None``: only operators end sessions).
    """

    def __init__(self, adapter: int, schedule: SessionSchedule | None) -> None:
        self._adapter = adapter
        self.keeper = SessionKeeper(schedule)
        self._missed_logged = 0

    def __repr__(self) -> str:
        return f"<SessionDriver [{self.keeper!r}]>"

    # ---- what every report and snapshot carries ----------------------------------------

    def report_fields(self) -> dict[str, int]:
        """The session fields of this adapter's StreamState."""
        fields = self.snapshot_fields()
        proposal = self.keeper.proposal
        if proposal is not None:
            fields.update(
                proposed_session=proposal.session,
                proposed_after_source_seq=proposal.after_source_seq,
                proposed_time_ns=proposal.time_ns,
                proposed_reason=int(proposal.reason),
            )
        return fields

    def snapshot_fields(self) -> dict[str, int]:
        """The session fields of a snapshot of this adapter's state."""
        session = self.keeper.session
        return {
            "session": session.id,
            "session_after_source_seq": session.after_source_seq,
            "session_boundary_msg_seq": session.boundary_msg_seq,
            "session_start_ns": session.start_ns,
            "session_reason": session.reason,
        }

    # ---- the active -----------------------------------------------------------------------

    def has_work(self, *, now: float, wall_ns: int) -> bool:
        """Whether the active's :meth:`tick` would do anything now (asked every turn: no view built)."""
        keeper = self.keeper
        return (
            not keeper.session.start_ns
            or keeper.proposal is not None
            or keeper.due(wall_ns=wall_ns, now=now) is not None
        )

    def tick(self, view: SessionView) -> list[Step]:
        """The active's timer: begin the first session's clock, propose a scheduled end, settle."""
        if not view.is_active:
            return []
        keeper = self.keeper
        if not keeper.session.start_ns:
            keeper.session = replace(keeper.session, start_ns=view.wall_ns)  # a group's first session
        if keeper.proposal is not None:
            return self._settle(view)
        due = keeper.due(wall_ns=view.wall_ns, now=view.now)
        return [] if due is None else self._propose(view, due, SessionReason.SCHEDULE)[1]

    def request_end(self, view: SessionView, reason: str) -> tuple[dict[str, Any], list[Step]]:
        """An operator ends the session now (``session_end``): the command's reply, and the steps."""
        if not view.is_active:
            return {
                "ok": False,
                "error": f"adapter {self._adapter} is not the active; the channel's active ends its "
                "session (feedctl session end CHANNEL sends it there)",
            }, []
        proposal, steps = self.keeper.proposal, list[Step]()
        if proposal is None:
            proposal, steps = self._propose(view, view.wall_ns, SessionReason.OPERATOR, why=reason)
        if proposal is None:
            return {
                "ok": False,
                "error": "a suspect source_seq jump is being checked; try again in a moment",
            }, []
        session = self.keeper.session
        if self.keeper.proposal is None:  # a group of one commits at once
            return {"ok": True, "session": session.id, "ended_at_msg_seq": session.boundary_msg_seq}, steps
        return {
            "ok": True,
            "session": session.id,
            "proposed_session": proposal.session,
            "after_source_seq": proposal.after_source_seq,
        }, steps

    def on_ack(self, view: SessionView, msg: syncbus.SessionAck) -> list[Step]:
        """A backup acknowledged our proposal."""
        if view.sync.role is not Role.ACTIVE or self.keeper.proposal is None:
            return []
        self.keeper.on_ack(
            msg.sender.adapter,
            session=msg.proposed_session,
            after=msg.after_source_seq,
            position=msg.position,
        )
        return self._settle(view)

    def _propose(
        self, view: SessionView, time_ns: int, reason: SessionReason, *, why: str = "schedule"
    ) -> tuple[Proposal | None, list[Step]]:
        if view.checking:
            return None, []  # tried again at the next tick
        after = view.position
        proposal = self.keeper.propose(after=after, time_ns=time_ns, reason=reason, now=view.now)
        logger.info(
            "adapter %d: ending session %d after source_seq %d (%s)",
            self._adapter,
            self.keeper.session.id,
            after,
            why,
        )
        fields = {"proposed": proposal.session, "after_source_seq": after, "reason": reason.name.lower()}
        steps: list[Step] = [HoldAt(after), Emit(Status("session_proposed", fields)), ReportNow()]
        # Fenced at our own position, everything up to the fence is converted.
        return proposal, steps + self._settle(replace(view, at_fence=True))

    def _settle(self, view: SessionView) -> list[Step]:
        keeper = self.keeper
        verdict = keeper.verdict(recent=view.recent_backups(), at_fence=view.at_fence, now=view.now)
        if verdict is Verdict.MOVE:
            return [HoldAt(keeper.move_fence()), ReportNow()]
        if verdict is Verdict.COMMIT:
            proposal = keeper.proposal
            assert proposal is not None
            return [Commit(proposal.boundary()), ReportNow()]
        if verdict is Verdict.WITHDRAW:
            withdrawn = keeper.withdraw(now=view.now)
            assert withdrawn is not None
            logger.warning(
                "adapter %d: session end withdrawn: not every backup answered within the timeout",
                self._adapter,
            )
            fields = {"proposed": withdrawn.session, "after_source_seq": withdrawn.after_source_seq}
            return [Unfence(), Emit(Status("session_withdrawn", fields)), ReportNow()]
        return []

    # ---- a backup ---------------------------------------------------------------------------

    def on_report(self, view: SessionView, msg: syncbus.StreamState) -> list[Step]:
        """Our active's report: follow its session, its proposal, or notice that we missed one."""
        if not msg.session:
            return []  # an active that knows no sessions
        keeper, mine = self.keeper, self.keeper.session.id
        if msg.session == mine:
            if keeper.session.start_ns != msg.session_start_ns:
                keeper.session = replace(keeper.session, start_ns=msg.session_start_ns)
            return self._follow_proposal(view, msg)
        if msg.session == mine + 1 and (view.rolling or view.position <= msg.session_after_source_seq):
            return self._follow_commit(view, msg)  # we converted nothing past where the active rolled
        return self._missed(msg)

    def _follow_commit(self, view: SessionView, msg: syncbus.StreamState) -> list[Step]:
        if view.rolling:
            return []  # already on our way to it
        reason = SessionReason(msg.session_reason or SessionReason.OPERATOR)
        boundary = Boundary(
            msg.session - 1, msg.session, msg.session_after_source_seq, msg.session_start_ns, reason
        )
        self.keeper.committed = Session(
            msg.session,
            msg.session_after_source_seq,
            msg.session_boundary_msg_seq,
            msg.session_start_ns,
            msg.session_reason,
        )
        return [Commit(boundary)]

    def _follow_proposal(self, view: SessionView, msg: syncbus.StreamState) -> list[Step]:
        keeper = self.keeper
        if msg.proposed_session != keeper.session.id + 1:
            return [Unfence()] if keeper.release() is not None else []  # withdrawn
        after, held = msg.proposed_after_source_seq, keeper.held
        if held is None or (held.session, held.after_source_seq) != (msg.proposed_session, after):
            reason = SessionReason(msg.proposed_reason or SessionReason.OPERATOR)
            keeper.hold(Proposal(msg.proposed_session, after, msg.proposed_time_ns, reason, view.now))
        position = view.position
        steps: list[Step] = [HoldAt(max(after, position))]
        if keeper.should_ack(session=msg.proposed_session, after=after, now=view.now):
            steps.append(
                Emit(SendSync(syncbus.SessionAck(view.sender, msg.proposed_session, after, position)))
            )
        return steps

    def _missed(self, msg: syncbus.StreamState) -> list[Step]:
        # The group is in a session we did not roll into where it did: nothing we hold is the
        # channel's, and our state is repaired by a snapshot (which brings the session along).
        if self._missed_logged != msg.session:
            self._missed_logged = msg.session
            self.keeper.missed += 1
            logger.warning(
                "adapter %d: the active is in session %d, this adapter in %d and past where it began; "
                "repairing from a snapshot",
                self._adapter,
                msg.session,
                self.keeper.session.id,
            )
        self.keeper.release()
        return [Abandon(), Unpublish(), Apply(SessionMissed(msg.session))]

    # ---- everyone ---------------------------------------------------------------------------

    def on_rolled(self, boundary: Boundary, msg_seq: int) -> list[Step]:
        """The pipeline rolled into ``boundary.started``; ``msg_seq`` is the end-of-session block."""
        keeper = self.keeper
        proposal = keeper.proposal if keeper.proposal is not None else keeper.held
        if proposal is None or proposal.session != boundary.started:
            proposal = Proposal(
                boundary.started, boundary.after_source_seq, boundary.time_ns, boundary.reason, 0
            )
        keeper.proposal = None
        session = keeper.begin(proposal, boundary_msg_seq=msg_seq)
        logger.info(
            "adapter %d: session %d ended at msg_seq %d (after source_seq %d); session %d began",
            self._adapter,
            boundary.ended,
            msg_seq,
            boundary.after_source_seq,
            session.id,
        )
        fields = {
            "ended": boundary.ended,
            "started": session.id,
            "msg_seq": msg_seq,
            "after_source_seq": boundary.after_source_seq,
            "time_ns": boundary.time_ns,
            "reason": boundary.reason.name.lower(),
        }
        return [Emit(Status("session", fields))]

    def on_adopted(self, snapshot: syncbus.Snapshot) -> None:
        """A snapshot replaced our state: its session is ours now."""
        if snapshot.session:
            self.keeper.session = Session(
                snapshot.session,
                snapshot.session_after_source_seq,
                snapshot.session_boundary_msg_seq,
                snapshot.session_start_ns,
                snapshot.session_reason,
            )

    def on_role_changed(self, old: Role, new: Role, *, now: float) -> list[Step]:
        """Promoted: a proposal we held is ours to carry out. Demoted: ours waits for the new active."""
        keeper = self.keeper
        if new is Role.ACTIVE:
            proposal = keeper.inherit(now=now)
            if proposal is not None:
                logger.info(
                    "adapter %d: promoted while session %d was proposed; carrying it out",
                    self._adapter,
                    proposal.session,
                )
                return [HoldAt(proposal.after_source_seq)]
        elif old is Role.ACTIVE:
            keeper.step_down()
        return []

    def recovered(self, session: Session) -> None:
        """Restart recovery found this session in the journal."""
        self.keeper.session = session

    def status(self, fence: int | None) -> dict[str, Any]:
        """The session's fields for the adapter's status (``fence``: the pipeline's)."""
        keeper = self.keeper
        session, pending = keeper.session, keeper.proposal or keeper.held
        return {
            "session": session.id,
            "session_start_ns": session.start_ns,
            "session_boundary_msg_seq": session.boundary_msg_seq,
            "session_proposed": None if pending is None else pending.session,
            "session_fence": fence,
            "sessions_rolled": keeper.rolled,
            "sessions_withdrawn": keeper.withdrawn,
            "sessions_missed": keeper.missed,
            "session_schedule": None if keeper.schedule is None else keeper.schedule.describe(),
        }
