"""Session boundaries inside the adapter core: the agreement of :mod:`adapter.core.session`, carried out.

:class:`SessionDriver` is the part of :class:`~adapter.core.machine.AdapterCore`
that handles sessions, kept apart so the machine only calls it at a few
points: the active's timer (:meth:`SessionDriver.tick`: the schedule, and the
fate of its proposal), a report of the active heard by a backup
(:meth:`SessionDriver.on_report`, before the report is compared), a backup's
acknowledgement heard by the active (:meth:`SessionDriver.on_ack`), role
changes, the operator's ``session_end``, snapshots, and the fields of every
report and snapshot it sends. The rolling itself -- state, end-of-session
block, journal record -- is the pipeline's (:meth:`Pipeline.commit`). Pure.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

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
from feedha.adapter.core.sync_types import Role, SessionMissed

if TYPE_CHECKING:
    from feedha.adapter.core.machine import AdapterCore

logger = logging.getLogger(__name__)

__all__ = ["SessionDriver"]


class SessionDriver:
    """Sessions of one adapter core.

    Args:
        core: the core it belongs to.
        schedule: the daily session end (``None``: only operators end sessions).
    """

    def __init__(self, core: AdapterCore, schedule: SessionSchedule | None) -> None:
        self._core = core
        self.keeper = SessionKeeper(schedule)
        self._missed_logged = 0

    def __repr__(self) -> str:
        return f"<SessionDriver [{self.keeper!r}]>"

    # ---- what every report and snapshot carries ----------------------------------------

    def report_fields(self) -> dict[str, int]:
        """The session fields of this adapter's StreamState."""
        session, proposal = self.keeper.session, self.keeper.proposal
        fields = {
            "session": session.id,
            "session_after_source_seq": session.after_source_seq,
            "session_boundary_msg_seq": session.boundary_msg_seq,
            "session_start_ns": session.start_ns,
            "session_reason": session.reason,
        }
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

    def tick(self) -> None:
        """The active's timer: begin the first session's clock, propose a scheduled end, settle."""
        core = self._core
        if core.sync.role is not Role.ACTIVE or core.sync.deciding:
            return
        keeper = self.keeper
        if not keeper.session.start_ns:
            keeper.session = replace(keeper.session, start_ns=core.wall_ns)  # a group's first session
        if keeper.proposal is None:
            due = keeper.due(wall_ns=core.wall_ns, now=core.now)
            if due is not None:
                self._propose(due, SessionReason.SCHEDULE)
            return
        self._settle()

    def request_end(self, reason: str) -> dict[str, Any]:
        """An operator ends the session now (``session_end``): the reply for the command."""
        core = self._core
        if core.sync.role is not Role.ACTIVE or core.sync.deciding:
            return {
                "ok": False,
                "error": f"adapter {core.config.adapter} is not the active; the channel's active ends its "
                "session (feedctl session end CHANNEL sends it there)",
            }
        proposal = self.keeper.proposal or self._propose(core.wall_ns, SessionReason.OPERATOR, why=reason)
        if proposal is None:
            return {"ok": False, "error": "a suspect source_seq jump is being checked; try again in a moment"}
        session = self.keeper.session
        if self.keeper.proposal is None:  # a group of one commits at once
            return {"ok": True, "session": session.id, "ended_at_msg_seq": session.boundary_msg_seq}
        return {
            "ok": True,
            "session": session.id,
            "proposed_session": proposal.session,
            "after_source_seq": proposal.after_source_seq,
        }

    def on_ack(self, msg: syncbus.SessionAck) -> None:
        """A backup acknowledged our proposal."""
        if self._core.sync.role is not Role.ACTIVE or self.keeper.proposal is None:
            return
        self.keeper.on_ack(
            msg.sender.adapter,
            session=msg.proposed_session,
            after=msg.after_source_seq,
            position=msg.position,
        )
        self._settle()

    def _propose(self, time_ns: int, reason: SessionReason, *, why: str = "schedule") -> Proposal | None:
        core = self._core
        pipeline = core.pipeline
        if pipeline.is_checking_jump:
            return None  # tried again at the next tick
        after = core.sequencer.last_source_seq
        proposal = self.keeper.propose(after=after, time_ns=time_ns, reason=reason, now=core.now)
        logger.info(
            "adapter %d: ending session %d after source_seq %d (%s)",
            core.config.adapter,
            self.keeper.session.id,
            after,
            why,
        )
        pipeline.hold_at(after, now=core.now, wall_ns=core.wall_ns, out=core.out)
        fields = {"proposed": proposal.session, "after_source_seq": after, "reason": reason.name.lower()}
        core.out.append(Status("session_proposed", fields))
        core.report_now()  # the backups learn of it at once, not at the next heartbeat
        self._settle()
        return proposal

    def _settle(self) -> None:
        core, keeper = self._core, self.keeper
        pipeline = core.pipeline
        verdict = keeper.verdict(recent=self._recent(), at_fence=pipeline.at_fence(), now=core.now)
        if verdict is Verdict.MOVE:
            after = keeper.move_fence()
            pipeline.hold_at(after, now=core.now, wall_ns=core.wall_ns, out=core.out)
            core.report_now()
        elif verdict is Verdict.COMMIT:
            proposal = keeper.proposal
            assert proposal is not None
            pipeline.commit(proposal.boundary(), now=core.now, wall_ns=core.wall_ns, out=core.out)
            core.report_now()
        elif verdict is Verdict.WITHDRAW:
            withdrawn = keeper.withdraw(now=core.now)
            assert withdrawn is not None
            pipeline.unfence(now=core.now, wall_ns=core.wall_ns, out=core.out)
            logger.warning(
                "adapter %d: session end withdrawn: not every backup answered within the timeout",
                core.config.adapter,
            )
            fields = {"proposed": withdrawn.session, "after_source_seq": withdrawn.after_source_seq}
            core.out.append(Status("session_withdrawn", fields))
            core.report_now()

    def _recent(self) -> set[int]:
        sync, now = self._core.sync, self._core.now
        return {
            peer.adapter
            for peer in sync.peers.values()
            if peer.role is Role.BACKUP and now - peer.last_seen <= ACK_RECENT_S
        }

    # ---- a backup ---------------------------------------------------------------------------

    def on_report(self, msg: syncbus.StreamState) -> None:
        """Our active's report: follow its session, its proposal, or notice that we missed one."""
        if not msg.session:
            return  # an active that knows no sessions
        keeper, mine = self.keeper, self.keeper.session.id
        if msg.session == mine:
            if keeper.session.start_ns != msg.session_start_ns:
                keeper.session = replace(keeper.session, start_ns=msg.session_start_ns)
            self._follow_proposal(msg)
        elif msg.session == mine + 1 and self._can_roll(msg):
            self._follow_commit(msg)
        else:
            self._missed(msg)

    def _can_roll(self, msg: syncbus.StreamState) -> bool:
        # We can roll where the active did if we have converted nothing past that point.
        pipeline = self._core.pipeline
        if pipeline.pending_roll is not None:
            return True
        return self._core.sequencer.last_source_seq <= msg.session_after_source_seq

    def _follow_commit(self, msg: syncbus.StreamState) -> None:
        core, keeper = self._core, self.keeper
        if core.pipeline.pending_roll is not None:
            return  # already on our way to it
        boundary = Boundary(
            msg.session - 1,
            msg.session,
            msg.session_after_source_seq,
            msg.session_start_ns,
            SessionReason(msg.session_reason or SessionReason.OPERATOR),
        )
        keeper.committed = Session(
            msg.session,
            msg.session_after_source_seq,
            msg.session_boundary_msg_seq,
            msg.session_start_ns,
            msg.session_reason,
        )
        core.pipeline.commit(boundary, now=core.now, wall_ns=core.wall_ns, out=core.out)

    def _follow_proposal(self, msg: syncbus.StreamState) -> None:
        core, keeper = self._core, self.keeper
        pipeline = core.pipeline
        if msg.proposed_session != keeper.session.id + 1:
            if keeper.release() is not None:
                pipeline.unfence(now=core.now, wall_ns=core.wall_ns, out=core.out)  # withdrawn
            return
        after, held = msg.proposed_after_source_seq, keeper.held
        if held is None or (held.session, held.after_source_seq) != (msg.proposed_session, after):
            reason = SessionReason(msg.proposed_reason or SessionReason.OPERATOR)
            keeper.hold(Proposal(msg.proposed_session, after, msg.proposed_time_ns, reason, core.now))
        position = core.sequencer.last_source_seq
        pipeline.hold_at(max(after, position), now=core.now, wall_ns=core.wall_ns, out=core.out)
        if keeper.should_ack(session=msg.proposed_session, after=after, now=core.now):
            ack = syncbus.SessionAck(core.sender(), msg.proposed_session, after, position)
            core.out.append(SendSync(ack))

    def _missed(self, msg: syncbus.StreamState) -> None:
        # The group is in a session we did not roll into where it did: nothing we hold is the
        # channel's, and our state is repaired by a snapshot (which brings the session along).
        core = self._core
        if self._missed_logged != msg.session:
            self._missed_logged = msg.session
            self.keeper.missed += 1
            logger.warning(
                "adapter %d: the active is in session %d, this adapter in %d and past where it began; "
                "repairing from a snapshot",
                core.config.adapter,
                msg.session,
                self.keeper.session.id,
            )
        self.keeper.release()
        core.pipeline.abandon(now=core.now, wall_ns=core.wall_ns, out=core.out)
        core.pipeline.unpublish()
        core.apply(SessionMissed(msg.session))

    # ---- everyone ---------------------------------------------------------------------------

    def after_source(self) -> None:
        """Source was converted: a committed boundary rolls once its fence is reached."""
        core = self._core
        pipeline = core.pipeline
        boundary = pipeline.pending_roll
        if boundary is not None and pipeline.at_fence():
            pipeline.commit(boundary, now=core.now, wall_ns=core.wall_ns, out=core.out)

    def on_rolled(self, boundary: Boundary, msg_seq: int) -> None:
        """The pipeline rolled into ``boundary.started``; ``msg_seq`` is the end-of-session block."""
        core, keeper = self._core, self.keeper
        proposal = keeper.proposal if keeper.proposal is not None else keeper.held
        if proposal is None or proposal.session != boundary.started:
            proposal = Proposal(
                boundary.started, boundary.after_source_seq, boundary.time_ns, boundary.reason, 0
            )
        if keeper.proposal is not None:
            keeper.proposal = None
        session = keeper.begin(proposal, boundary_msg_seq=msg_seq)
        logger.info(
            "adapter %d: session %d ended at msg_seq %d (after source_seq %d); session %d began",
            core.config.adapter,
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
        core.out.append(Status("session", fields))

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

    def on_role_changed(self, old: Role, new: Role) -> None:
        """Promoted: a proposal we held is ours to carry out. Demoted: ours waits for the new active."""
        core, keeper = self._core, self.keeper
        if new is Role.ACTIVE:
            proposal = keeper.inherit(now=core.now)
            if proposal is not None:
                logger.info(
                    "adapter %d: promoted while session %d was proposed; carrying it out",
                    core.config.adapter,
                    proposal.session,
                )
                core.pipeline.hold_at(
                    proposal.after_source_seq, now=core.now, wall_ns=core.wall_ns, out=core.out
                )
        elif old is Role.ACTIVE:
            keeper.step_down()

    def recovered(self, session: Session) -> None:
        """Restart recovery found this session in the journal."""
        self.keeper.session = session

    def status(self) -> dict[str, Any]:
        """The session's fields for the adapter's status."""
        keeper = self.keeper
        session, pending = keeper.session, keeper.proposal or keeper.held
        return {
            "session": session.id,
            "session_start_ns": session.start_ns,
            "session_boundary_msg_seq": session.boundary_msg_seq,
            "session_proposed": None if pending is None else pending.session,
            "session_fence": self._core.pipeline.fence,
            "sessions_rolled": keeper.rolled,
            "sessions_withdrawn": keeper.withdrawn,
            "sessions_missed": keeper.missed,
            "session_schedule": None if keeper.schedule is None else keeper.schedule.describe(),
        }
