"""The sync rules' state of one adapter, and the one place the parts' answers are carried out.

Theory of operation
-------------------
:class:`Driver` owns what the sync rules decide (:class:`~adapter.core.sync_types.SyncState`:
role, term, status, peers), the clock of the input being handled, and the
active's last reported position. Every answer of a part comes back here to be
carried out in order into the turn's actions: a sync event goes to the rules
(:meth:`Driver.apply`) and their actions become sync-bus messages
(:mod:`~adapter.core.reports`); a part's :mod:`~adapter.core.steps` are
carried (:meth:`Driver.carry`); a conversion of the pipeline runs to its end
with its interrupts answered (:meth:`Driver.drive`). The parts see the sync
state only as the frozen views built here (:meth:`Driver.gap_view`,
:meth:`Driver.session_view`, :meth:`Driver.purge_context`). No part holds a
pointer to the driver; the :class:`~adapter.core.machine.AdapterCore` routes
its inputs here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Final

from feedha.adapter.conversion.budget import adopted_budget
from feedha.adapter.core import syncbus
from feedha.adapter.core.actions import RecordTerm, SendSync, Status
from feedha.adapter.core.gaps import GapView
from feedha.adapter.core.health import health_score
from feedha.adapter.core.health_side import FAULT_LIMIT, FAULT_WINDOW_S, HealthSide
from feedha.adapter.core.parts import CoreParts
from feedha.adapter.core.purging import PurgeContext
from feedha.adapter.core.reports import Reporter
from feedha.adapter.core.sequencer import PositionReport, ReportVerdict
from feedha.adapter.core.session_driver import SessionView
from feedha.adapter.core.steps import (
    Abandon,
    Apply,
    Commit,
    Distrust,
    Emit,
    HoldAt,
    ReleaseGap,
    ReportNow,
    Step,
    Unfence,
    Unpublish,
)
from feedha.adapter.core.sync import Action as SyncAction
from feedha.adapter.core.sync import (
    ActiveReported,
    ArrivalChecked,
    CommandRejected,
    HealthMeasured,
    OperatorCommand,
    RequestSnapshot,
    Role,
    RoleChanged,
    SendFailed,
    SendHandover,
    SendHealth,
    SendSnapshot,
    SendStreamState,
    SnapshotAdopted,
    SyncEvent,
    SyncState,
    SyncStatus,
    initial_state,
    on_event,
)
from feedha.adapter.core.sync_types import CommandKind
from feedha.adapter.core.turn import (
    Adopted,
    Arrived,
    Conversion,
    GapFound,
    Interrupt,
    Reply,
    Rolled,
    Standing,
    Turn,
)

logger = logging.getLogger(__name__)

__all__ = ["WOKE_AFTER_S", "Driver"]

TICK_AT_LEAST_EVERY_S: Final = 0.1
# Longer than this between two calls and the process was not running (stopped, swapped out):
# what the group said meanwhile waits unread, so no election is held before it is heard.
WOKE_AFTER_S: Final = 2 * TICK_AT_LEAST_EVERY_S


class Driver:
    """The sync rules' state, the input's clock, and the carrying out of the parts' answers.

    Args:
        parts: the core's parts.
        health: the figures the health score is measured from.
        now: the monotonic clock at start-up, in seconds.
    """

    def __init__(self, parts: CoreParts, health: HealthSide, *, now: float) -> None:
        config = parts.config
        self._parts, self._health, self._reporter = parts, health, Reporter(parts)
        # The sync rules' state of this adapter: read by anyone, replaced by the driver only.
        self.sync: SyncState = initial_state(
            adapter=config.adapter,
            want_active=config.want_active,
            term=config.term,
            now=now,
            group_size=config.group_size,
        )
        self.now, self.wall_ns = now, 0  # the clocks of the input being handled (or the last one)
        self.woke = False  # the process did not run for a while before this input
        self.active_position = 0  # the last source_seq the active reported
        self.rejection: str | None = None  # why the sync rules rejected the last operator command
        self.snapshots_sent = self.unpublished_at_promotion = 0

    @property
    def reporter(self) -> Reporter:
        """The builder of this adapter's messages about itself."""
        return self._reporter

    def turn(self, now: float, wall_ns: int) -> Turn:
        """Start handling an input at ``now`` (monotonic) and ``wall_ns``: its turn, to fill with actions."""
        self.woke = now - self.now > WOKE_AFTER_S
        self.now, self.wall_ns = now, wall_ns
        return Turn(now, wall_ns)

    def recovered(self, *, published: int, term: int) -> None:
        """The journal was read at start-up: ``published`` went out, and ``term`` was the highest recorded."""
        self.sync = self.sync.evolve(published=published, term=max(self.sync.term, term))

    def force_role(self, role: Role, turn: Turn) -> None:
        """Take ``role`` without an election (tests and benchmarks: an adapter alone, at once)."""
        old = self.sync
        self.sync = old.evolve(
            deciding=False, role=role, active=self._parts.config.adapter if role is Role.ACTIVE else None
        )
        if old.role is not role:
            self._follow_role(old.role, role, turn)

    def fault(self, where: str, turn: Turn) -> None:
        """Book an internal fault ``where``: one is contained, one that keeps coming back fails the adapter.

        It goes off line once (and stays up, so nothing restarts it into the same fault again and again).
        """
        if self._health.fault(turn.now) and self.sync.role is not Role.FAILED:
            reason = f"{FAULT_LIMIT} internal faults in {FAULT_WINDOW_S:g}s (the last {where})"
            self.apply(OperatorCommand(CommandKind.FAIL, reason), turn)

    # ---- the sync rules ---------------------------------------------------------------------

    def apply(self, event: SyncEvent, turn: Turn) -> None:
        """Feed one event to the sync rules and carry out what follows from it."""
        if type(event) is SnapshotAdopted:
            self.carry(self._parts.gaps.covered(event.source_seq), turn)
        old = self.sync
        self.sync, actions = on_event(old, event, now=turn.now, config=self._parts.config.sync)
        new = self.sync
        if old.role is not new.role:
            self._follow_role(old.role, new.role, turn)
        if new.term > old.term:
            turn.out.append(RecordTerm(new.term))  # a restart must never go back to a lower term
        if old.is_publishing and not new.is_publishing:
            self._parts.emitter.unpublish()  # failed: nothing unconfirmed goes out any more
        for action in actions:
            _SYNC_ACTIONS[type(action)](self, action, turn)

    def _follow_role(self, old: Role, new: Role, turn: Turn) -> None:
        # The gate and the session follow the role: promoted, our numbering is the channel's;
        # demoted, what we numbered as the active goes out as it was and what follows waits.
        parts = self._parts
        if new is Role.ACTIVE:
            turn.out += parts.emitter.open()
            parts.gaps.forget()
        elif old is Role.ACTIVE:
            turn.out += parts.pipeline.seal(self.sync.term, turn)
            parts.emitter.close(confirmed=parts.sequencer.last_recorded_source_seq, trusted=True)
        self.carry(parts.sessions.on_role_changed(old, new, now=turn.now), turn)
        parts.conflated.on_role_changed(old, new)

    def on_report(self, msg: syncbus.StreamState, turn: Turn) -> None:
        """Our active's report: the session first (a committed boundary changes what the report
        means), then the position compared with ours -- the only word on what may go out."""
        parts = self._parts
        self._follow_budget(msg.table_budget, turn)
        if self.sync.role is Role.FAILED:
            return  # it could not hold the active's tables
        self.carry(parts.sessions.on_report(self.session_view(), msg), turn)
        if not msg.last_source_seq:
            return
        at = self.active_position = msg.last_source_seq
        verdict, ahead_by = parts.sequencer.compare(PositionReport(at, msg.last_msg_seq, msg.digest))
        self.carry(parts.gaps.on_report(at=at, verdict=verdict), turn)
        emitter = parts.emitter
        emitter.gate.heard()
        if verdict is ReportVerdict.MATCH:
            turn.out += emitter.confirm(at)
        elif verdict in (ReportVerdict.NUMBERING_MISMATCH, ReportVerdict.DIGEST_MISMATCH):
            emitter.unpublish()
        self.apply(ActiveReported(msg.sender.adapter, msg.sender.term, verdict, ahead_by), turn)

    def _follow_budget(self, announced: int, turn: Turn) -> None:
        # The group refuses (memory_limit) what its active refuses: a backup runs with the
        # active's tables' budget when its own holds it; one that cannot fails itself, saying so.
        state = self._parts.state
        own, current = self._parts.config.table_budget, state.table_budget
        if not own or not announced or announced == current or self.sync.role is not Role.BACKUP:
            return
        budget = adopted_budget(own, announced)
        if budget is None:
            reason = (
                f"the active's conversion tables may count {announced:,} bytes; this adapter's "
                f"memory budget allows {own:,}: run every adapter of a channel with the same "
                "--memory-budget (docs/deployment.md)"
            )
            self.apply(OperatorCommand(CommandKind.FAIL, reason), turn)
            return
        logger.warning(
            "tables' budget %d bytes -> %d, the active's (this adapter's own: %d); every adapter "
            "of a channel should run with the same --memory-budget",
            current, budget, own,
        )  # fmt: skip
        state.table_budget = budget

    def wants_snapshot(self) -> bool:
        """Whether to adopt the active's snapshot: asked for, or not in sync, or suspect.

        The active's snapshots go to every backup on the bus. One that did not ask and
        is in sync has the same state already: adopting it would only discard what waits
        at its gate (a hole in its line and journal each time another backup joins).
        """
        sync = self.sync
        return (
            sync.snapshot_requested_at is not None
            or (sync.role is not Role.ACTIVE and sync.status is not SyncStatus.IN_SYNC)
            or self._parts.emitter.suspect_after is not None
        )

    def adopt_now(self, msg: syncbus.Snapshot, turn: Turn) -> None:
        """Adopt the active's snapshot (when the pipeline can)."""
        if self._parts.pipeline.adoption.on_snapshot(msg):
            self._parts.sessions.on_adopted(msg)
            self.apply(SnapshotAdopted(msg.source_seq), turn)

    # ---- the pipeline's interrupts and the parts' steps -----------------------------------

    def standing(self) -> Standing:
        """What the pipeline needs of the sync state: publishing, a backup, the term."""
        sync = self.sync
        return Standing(sync.is_publishing, sync.role is Role.BACKUP, sync.term)

    def drive(self, conversion: Conversion, turn: Turn) -> int:
        """Run a conversion to its end, answering its interrupts; returns how many got a msg_seq."""
        try:
            interrupt = next(conversion)
            while True:
                interrupt = conversion.send(self._on_interrupt(interrupt, turn))
        except StopIteration as done:
            return int(done.value)

    def _on_interrupt(self, interrupt: Interrupt, turn: Turn) -> Reply:
        parts = self._parts
        if type(interrupt) is GapFound:
            hold, steps = parts.gaps.on_gap(self.gap_view(), interrupt.gap, jump=interrupt.jump)
            self.carry(steps, turn)
            return Reply(self.standing(), hold)
        if type(interrupt) is Arrived:
            check = interrupt.check
            self.carry(parts.gaps.on_arrival(at=interrupt.at, renumbered=check.renumbered), turn)
            self.apply(ArrivalChecked(check.renumbered, check.digest_matches), turn)
        elif type(interrupt) is Adopted:
            parts.sessions.on_adopted(interrupt.snapshot)
            self.apply(SnapshotAdopted(interrupt.snapshot.source_seq), turn)
        elif type(interrupt) is Rolled:
            self.carry(parts.sessions.on_rolled(interrupt.boundary, interrupt.msg_seq), turn)
        return Reply(self.standing())

    def carry(self, steps: list[Step], turn: Turn) -> None:
        """Carry out the steps a part of the core returned, in order."""
        for step in steps:
            if isinstance(step, Emit):
                turn.out.append(step.action)
            elif isinstance(step, Apply):
                self.apply(step.event, turn)
            elif isinstance(step, ReportNow):
                if self.sync.role is Role.ACTIVE:
                    self.send_stream_state(None, turn)
            elif isinstance(step, Unpublish):
                self._parts.emitter.unpublish()
            elif isinstance(step, Distrust):
                self._parts.emitter.distrust(step.after)
            else:
                self.drive(self._waiting(step, turn), turn)

    def _waiting(self, step: HoldAt | Commit | Unfence | Abandon | ReleaseGap, turn: Turn) -> Conversion:
        # The steps that end or move a wait of the pipeline (and convert what waited).
        pipeline, standing = self._parts.pipeline, self.standing()
        if isinstance(step, HoldAt):
            return pipeline.hold_at(step.after, standing, turn)
        if isinstance(step, Commit):
            return pipeline.commit(step.boundary, standing, turn)
        if isinstance(step, Unfence):
            return pipeline.unfence(standing, turn)
        if isinstance(step, Abandon):
            return pipeline.abandon(standing, turn)
        return pipeline.release_gap(standing, turn)

    # ---- the frozen views the parts decide on -------------------------------------------------

    def session_view(self) -> SessionView:
        """The session driver's view of the sync state and the pipeline, now."""
        pipeline = self._parts.pipeline
        return SessionView(
            sync=self.sync,
            now=self.now,
            wall_ns=self.wall_ns,
            position=self._parts.sequencer.last_source_seq,
            at_fence=pipeline.at_fence(),
            rolling=pipeline.waiting.pending_roll is not None,
            checking=pipeline.is_checking_jump or pipeline.waiting.holding_gap is not None,
            sender=self.sender(),
        )

    def gap_view(self) -> GapView:
        """The gap desk's view of the sync state and the numbering, now."""
        sync, parts = self.sync, self._parts
        return GapView(
            sync=sync,
            now=self.now,
            position=parts.sequencer.last_source_seq,
            trusted=sync.is_in_sync and parts.emitter.suspect_after is None,
            recorded=parts.sequencer.recorded_within,
            sender=self.sender(),
        )

    def purge_context(self) -> PurgeContext:
        """The delayed side's view of the sync state and the journal, now."""
        journal = self._parts.emitter.journal
        last = None if journal is None else journal.last_msg_seq
        return self._parts.delayed.context(
            self.sync, self.sender(), now=self.now, wall_ns=self.wall_ns, journal_last=last
        )

    def sender(self, role: Role | None = None) -> syncbus.Sender:
        """This adapter as the sender of a sync-bus message (in ``role``; default: its own)."""
        sync = self.sync
        return syncbus.Sender(
            self._parts.config.adapter, sync.term, sync.role if role is None else role, self.wall_ns
        )

    def lag_now(self) -> int:
        """Source messages behind the active's last report, at this moment (a backup; else 0)."""
        if self.sync.role is not Role.BACKUP:
            return 0
        return max(0, self.active_position - self._parts.sequencer.last_source_seq)

    # ---- the sync rules' actions ----------------------------------------------------------

    def send_stream_state(self, action: SyncAction | None, turn: Turn) -> None:
        """Report this adapter's stream state on the sync bus now."""
        turn.out.append(SendSync(self._reporter.stream_state(self.sender())))

    def _send_health(self, action: SyncAction, turn: Turn) -> None:
        counters, emitter = self._parts.pipeline.counters, self._parts.emitter
        sample = self._health.measure(
            now=turn.now, numbered=counters.numbered, errors=counters.errors, lag=self.lag_now()
        )
        self.apply(HealthMeasured(health_score(sample), emitter.published_msg_seq), turn)
        turn.out.append(SendSync(self._reporter.health(self.sender(), self.sync, sample)))

    def _request_snapshot(self, action: SyncAction, turn: Turn) -> None:
        assert isinstance(action, RequestSnapshot)
        turn.out.append(SendSync(syncbus.SnapshotRequest(self.sender(), action.target)))

    def _send_snapshot(self, action: SyncAction, turn: Turn) -> None:
        turn.out.append(SendSync(self._reporter.snapshot(self.sender())))
        self.snapshots_sent += 1

    def _role_changed(self, action: SyncAction, turn: Turn) -> None:
        assert isinstance(action, RoleChanged)
        parts = self._parts
        next_msg_seq = parts.sequencer.next_msg_seq
        old, new = action.old.value, action.new.value
        logger.info(
            "adapter %d: %s -> %s, term %d, next msg_seq %d (%s)",
            *(parts.config.adapter, old, new, action.term, next_msg_seq, action.reason),
        )
        turn.out += parts.pipeline.seal(self.sync.term, turn)
        fields = {"old": old, "new": new, "term": action.term, "reason": action.reason}
        if action.new is Role.ACTIVE:
            fields["unpublished"] = self._unpublished_at_promotion()
        turn.out.append(Status("role", {**fields, "next_msg_seq": next_msg_seq}))

    def _unpublished_at_promotion(self) -> int:
        # Everything numbered went out when the gate opened: the new active goes on from the
        # first msg_seq it has not published. A hole here means output was discarded before
        # the promotion (a forced one): reported, and the journals fill it.
        published, last = self._parts.emitter.published_msg_seq, self._parts.sequencer.last_msg_seq
        unpublished = last - published
        if unpublished > 0 and published:
            self.unpublished_at_promotion += unpublished
            logger.warning(
                "adapter %d: promoted with %d numbered messages it had not published (msg_seq %d..%d)",
                *(self._parts.config.adapter, unpublished, published + 1, last),
            )
        return max(0, unpublished)

    def _send_handover(self, action: SyncAction, turn: Turn) -> None:
        assert isinstance(action, SendHandover)
        # Sent as the active's last word, so a backup that hears it still follows us
        # (a backup's word from its active would make it elect at once).
        turn.out.append(SendSync(syncbus.Handover(self.sender(Role.ACTIVE), action.target, action.reason)))

    def _send_failed(self, action: SyncAction, turn: Turn) -> None:
        assert isinstance(action, SendFailed)
        turn.out.append(SendSync(syncbus.Failed(self.sender(), action.reason)))

    def _command_rejected(self, action: SyncAction, turn: Turn) -> None:
        assert isinstance(action, CommandRejected)
        logger.warning("command %s rejected: %s", action.kind.value, action.reason)
        self.rejection = f"{action.kind.value} rejected: {action.reason}"


_SYNC_ACTIONS: Final[Mapping[type, Callable[[Driver, SyncAction, Turn], None]]] = {
    SendStreamState: Driver.send_stream_state,
    SendHealth: Driver._send_health,
    RequestSnapshot: Driver._request_snapshot,
    SendSnapshot: Driver._send_snapshot,
    RoleChanged: Driver._role_changed,
    SendFailed: Driver._send_failed,
    CommandRejected: Driver._command_rejected,
    SendHandover: Driver._send_handover,
}
