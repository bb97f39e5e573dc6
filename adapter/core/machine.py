"""The feed adapter as one sans-IO state machine: inputs with the time in, actions out.

Theory of operation
-------------------
:class:`AdapterCore` is everything an adapter decides, with no socket and no
clock (as h11 keeps HTTP in one state machine). The runner
(:mod:`adapter.runner`) reads bytes and the clocks, calls one handler per
input and carries out the :mod:`~adapter.core.actions` it returns:

==================================  =========================================================
input                               handler
==================================  =========================================================
a source frame (ZeroMQ parts)       :meth:`AdapterCore.on_source`
a sync-bus message (decoded)        :meth:`AdapterCore.on_sync` (garbage: ``on_sync_garbage``)
the loop went round / a timer       :meth:`AdapterCore.on_tick`: seal the packet, timers
an operator command                 :meth:`AdapterCore.on_command` (reply, actions)
the machine's figures               :meth:`AdapterCore.on_machine_sample`
the journal at start-up             :meth:`AdapterCore.recover`
==================================  =========================================================

Source frames go through the :class:`~adapter.core.pipeline.Pipeline`
(conversion runs, the careful path, numbering, packets, journal). Everything
the sync rules must hear of becomes an event for
:func:`adapter.core.sync.on_event` (:meth:`AdapterCore.apply`), whose actions
turn into sync-bus messages and status events here. The runner asks
:meth:`AdapterCore.next_deadline` when to call ``on_tick`` again and
:meth:`AdapterCore.reads_source` whether to read source frames now (not while
deciding the role, not while throttled).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from feedha.adapter.conversion.engine import ConversionEngine
from feedha.adapter.core import recovery, syncbus
from feedha.adapter.core.actions import Action, Publish, RecordTerm, SendSync, Status
from feedha.adapter.core.boundary import SessionDriver
from feedha.adapter.core.commands import (
    Command,
    CorruptState,
    DropPackets,
    EndSession,
    Penalty,
    Purge,
    RoleCommand,
    ShowStatus,
    Throttle,
)
from feedha.adapter.core.config import MAX_PAUSE_S, CoreConfig
from feedha.adapter.core.delayed_side import DelayedSide
from feedha.adapter.core.gaps import (
    ANSWER_TIMEOUT_S,
    ASK_RECENT_S,
    BackupGaps,
    Gap,
    GapQuery,
    QueryVerdict,
    Settlement,
    decide,
)
from feedha.adapter.core.health import HealthMeter, MachineSample, health_score
from feedha.adapter.core.journaling import JournalPlan
from feedha.adapter.core.output import LineOutput
from feedha.adapter.core.pipeline import Pipeline
from feedha.adapter.core.purging import PurgeContext
from feedha.adapter.core.records import RecordLike
from feedha.adapter.core.sequencer import PositionReport, ReportVerdict
from feedha.adapter.core.session import Boundary
from feedha.adapter.core.sync import Action as SyncAction
from feedha.adapter.core.sync import (
    ActiveReported,
    ArrivalChecked,
    CommandRejected,
    GapPending,
    GapSettled,
    HandOver,
    HandoverHeard,
    HealthMeasured,
    OperatorCommand,
    PeerHeard,
    RequestSnapshot,
    Role,
    RoleChanged,
    SendFailed,
    SendHandover,
    SendHealth,
    SendSnapshot,
    SendStreamState,
    SnapshotAdopted,
    SnapshotRequested,
    SyncEvent,
    SyncState,
    SyncStatus,
    Tick,
    initial_state,
    next_deadline,
    on_event,
)
from feedha.adapter.core.sync_types import CommandKind

logger = logging.getLogger(__name__)

__all__ = ["AdapterCore", "SyncView"]

TICK_AT_LEAST_EVERY_S: Final = 0.1
# Longer than this between two calls and the process was not running (stopped, swapped out):
# what the group said meanwhile waits unread, so no election is held before it is heard.
WOKE_AFTER_S: Final = 2 * TICK_AT_LEAST_EVERY_S
FAULT_LIMIT: Final = 5  # internal faults within FAULT_WINDOW_S that make the adapter fail itself
FAULT_WINDOW_S: Final = 60.0


@dataclass(frozen=True, slots=True)
class SyncView:
    """The adapter's standing for the admin server's registry."""

    role: Role
    status: SyncStatus
    behind: bool  # in sync by the rules, but further behind the active than the tolerance
    term: int
    next_msg_seq: int
    health_score: float
    lag: int


class AdapterCore:
    """One feed adapter's decisions.

    Args:
        config: identity, numbering, timers and limits.
        engine: the conversion engine (it owns the conversion state).
        now: the monotonic clock at start-up, in seconds.
    """

    def __init__(self, config: CoreConfig, engine: ConversionEngine, *, now: float) -> None:
        self.config = config
        self._sync: SyncState = initial_state(
            adapter=config.adapter,
            want_active=config.want_active,
            term=config.term,
            now=now,
            group_size=config.group_size,
        )
        self.is_publishing = self._sync.is_publishing
        output = LineOutput(
            channel=config.channel_number,
            adapter=config.adapter,
            max_packet_bytes=config.max_packet_bytes,
            heartbeat_s=config.line_heartbeat_s,
        )
        journal = None
        if config.journal:
            every, interval = config.checkpoint_every, config.checkpoint_interval_s
            journal = JournalPlan(
                source_stream=config.source_stream_number,
                checkpoint_every=every,
                checkpoint_interval_s=interval,
                now=now,
            )
        self.pipeline = Pipeline(
            engine,
            output,
            journal,
            source_stream=config.source_stream_number,
            sync=self,
            max_source_gap=config.max_source_gap,
            jump_confirm=config.jump_confirm,
        )
        self.engine, self.state, self.sequencer = engine, engine.state, self.pipeline.sequencer
        self.pipeline.gate.close(confirmed=0, trusted=False)  # every adapter starts as a backup that listens
        self.sessions = SessionDriver(self, config.session_schedule)
        self.state.session = self.sessions.keeper.session.id
        self.health = HealthMeter(penalty=config.health_penalty, now=now)
        self.delayed = DelayedSide(config, now=now)  # the delayed line and the group's purges
        self.sync_garbage = self.snapshots_sent = 0
        self._active_position = 0  # the last source_seq the active reported
        self._paused_until = 0.0
        self._rate_limit = 0.0  # operator throttle, messages/s (0: none)
        self._rejection: str | None = None
        self._faults: deque[float] = deque(maxlen=FAULT_LIMIT)
        self._peer_rates: dict[int, tuple[float, float]] = {}  # adapter -> (message rate, heard at)
        self.gaps = BackupGaps()  # a backup's own unsettled gap and the active's questions
        self.gap_query: GapQuery | None = None  # the active's open question about a gap
        self._gap_passed: Gap | None = None  # the active: the gap the group answered (number on)
        self._gap_local: Gap | None = None  # a gap that is ours alone (we handed the role over for it)
        self.gap_counts = {"asked": 0, "common": 0, "local": 0, "handed_over": 0}
        self.unpublished_at_promotion = 0  # numbered messages a promoted adapter had not published
        self._out: list[Action] = []
        self._now = now
        self._wall_ns = 0
        self._woke = False  # the process did not run for a while before this input

    def __repr__(self) -> str:
        sync = self.sync
        return (
            f"<AdapterCore [adapter={self.config.adapter}, role={sync.role.value}, "
            f"status={sync.status.value}, term={sync.term}, next_msg_seq={self.sequencer.next_msg_seq}]>"
        )

    # ---- inputs -----------------------------------------------------------------------

    def on_source(self, parts: list[bytes], *, now: float, wall_ns: int) -> list[Action]:
        """One ZeroMQ message from the source: ``[topic, frame]``; a frame carries FIX messages."""
        self._clock(now, wall_ns)
        if len(parts) != 2:
            self.pipeline.counters.malformed_frames += 1
            self.pipeline.quarantine(
                "malformed_frame", None, f"a message of {len(parts)} parts", b"".join(parts)
            )
            return self._take()
        counters = self.pipeline.counters
        faults = counters.internal_errors
        converted = self.pipeline.on_frame(parts[1], now=now, wall_ns=wall_ns, out=self._out)
        if self.pipeline.pending_roll is not None:
            self.sessions.after_source()
        self._answer_gaps()
        if converted and (self._sync.throttled or self._rate_limit):
            self._throttle(converted)
        if counters.internal_errors > faults:
            self._fault("converting a source frame")
        return self._take()

    def on_fault(self, where: str, *, now: float, wall_ns: int) -> list[Action]:
        """The runner caught an unexpected exception in a handler (a bug): count it, fail if it repeats."""
        self._clock(now, wall_ns)
        self.pipeline.counters.internal_errors += 1
        self._fault(where)
        return self._take()

    def on_sync(self, msg: syncbus.SyncMessage, *, now: float, wall_ns: int) -> list[Action]:
        """One message from a peer on the sync bus."""
        self._clock(now, wall_ns)
        sender = msg.sender
        if sender.adapter == self.config.adapter:
            return []
        self.apply(_peer_heard(msg))
        if isinstance(msg, syncbus.Health):
            self._peer_rates[sender.adapter] = (msg.message_rate, now)
        sync = self.sync
        from_active = sender.adapter == sync.active and sender.term == sync.term and sync.role is Role.BACKUP
        if isinstance(msg, syncbus.StreamState) and from_active:
            self.sessions.on_report(msg)  # first: a committed boundary changes what the report means
        if isinstance(msg, syncbus.StreamState) and from_active and msg.last_source_seq:
            self._active_position = msg.last_source_seq
            report = PositionReport(msg.last_source_seq, msg.last_msg_seq, msg.digest)
            verdict, ahead_by = self.sequencer.compare(report)
            self._settle_gap_by_report(msg.last_source_seq, verdict)
            self._gate_on_report(verdict, msg.last_source_seq)
            self.apply(ActiveReported(sender.adapter, sender.term, verdict, ahead_by))
        elif isinstance(msg, syncbus.GapQuery | syncbus.GapAnswer | syncbus.Handover):
            self._on_gap_message(msg, from_active=from_active)
        elif isinstance(msg, syncbus.SnapshotRequest):
            self.apply(SnapshotRequested(sender.adapter, msg.target_adapter))
        elif isinstance(msg, syncbus.Snapshot) and from_active and self._wants_snapshot():
            if self.pipeline.on_snapshot(msg):
                self.apply(SnapshotAdopted(msg.source_seq))
        elif isinstance(msg, syncbus.SessionAck):
            self.sessions.on_ack(msg)
        if isinstance(msg, syncbus.StreamState | syncbus.Purges | syncbus.PurgeAck | syncbus.Health):
            self.delayed.on_sync(msg, self._purge_context(), self._out, from_active=from_active)
        self._decide_gap()
        return self._take()

    def _wants_snapshot(self) -> bool:
        # The active's snapshots go to every backup on the bus. One that did not ask and
        # is in sync has the same state already: adopting it would only discard what waits
        # at its gate (a hole in its line and journal each time another backup joins).
        sync = self.sync
        return (
            sync.snapshot_requested_at is not None
            or (sync.role is not Role.ACTIVE and sync.status is not SyncStatus.IN_SYNC)
            or self.pipeline.suspect_after is not None
        )

    def on_sync_garbage(self) -> None:
        """A sync-bus frame that did not decode (counted, nothing else)."""
        self.sync_garbage += 1

    def on_tick(self, *, now: float, wall_ns: int) -> list[Action]:
        """The loop went round: seal the packet being filled and fire whatever timer is due."""
        self._clock(now, wall_ns)
        self.pipeline.seal(now=now, wall_ns=wall_ns, out=self._out)
        journal = self.pipeline.journal
        if journal is not None:
            last = self.sequencer.last_source_seq
            checkpoint = journal.checkpoint(
                now=now,
                last_source_seq=last,
                symbols=self.state.snapshot,
                session=self.sessions.keeper.session,
                purges=self.delayed.desk.book.entries,
            )
            if checkpoint is not None:
                self._out.append(checkpoint)
        if now >= next_deadline(self.sync, self.config.sync, now=now) and not self._woke:
            self.apply(Tick())
        self._decide_gap()
        self.sessions.tick()
        self._release_if_active_silent(now)
        self.delayed.on_tick(self._purge_context(), self._out)
        output = self.pipeline.output
        if self.sync.is_publishing and now >= output.heartbeat_due() and self.pipeline.may_heartbeat():
            next_msg_seq = self.sequencer.next_msg_seq
            packet = output.heartbeat(
                term=self.sync.term, next_msg_seq=next_msg_seq, now=now, send_time_ns=wall_ns
            )
            self._out.append(Publish(packet))
        return self._take()

    def on_command(
        self, command: Command, *, now: float, wall_ns: int
    ) -> tuple[dict[str, Any], list[Action]]:
        """Carry out an operator command; returns the reply and the actions."""
        self._clock(now, wall_ns)
        self._rejection = None
        reply: dict[str, Any] = {"ok": True}
        if isinstance(command, DropPackets | CorruptState | Penalty) and not self.config.fault_injection:
            return {
                "ok": False,
                "error": "fault injection is off (start the adapter with --allow-fault-injection)",
            }, []
        if isinstance(command, RoleCommand):
            self.apply(OperatorCommand(command.kind, command.reason, command.force))
        elif isinstance(command, Throttle):
            self._rate_limit = command.rate
            reply["rate"] = command.rate
        elif isinstance(command, DropPackets):
            self.pipeline.output.inject_drops(every=command.every, count=command.count)
            reply.update(every=command.every, count=command.count)
        elif isinstance(command, Penalty):
            self.health.penalty = command.value
        elif isinstance(command, CorruptState):
            self.pipeline.corrupt(command.delta)
            reply["digest"] = self.state.digest
        elif isinstance(command, EndSession):
            return self.sessions.request_end(command.reason), self._take()
        elif isinstance(command, Purge):
            return self.delayed.on_command(command, self._purge_context(), self._out), self._take()
        self._decide_gap()
        if self._rejection is not None:
            reply = {"ok": False, "error": self._rejection}
        elif isinstance(command, ShowStatus | RoleCommand):
            reply.update(self.status())
        return reply, self._take()

    def on_machine_sample(self, sample: MachineSample) -> None:
        """The latest memory and CPU figures of this process's machine."""
        self.health.on_machine_sample(sample)

    def recover(
        self,
        checkpoint: recovery.CheckpointLike | None,
        journal: recovery.JournalSource,
        *,
        journal_last_msg_seq: int,
        term: int = 0,
    ) -> recovery.RecoverySummary:
        """Rebuild numbering, conversion state and term from the journal (before any other input).

        Args:
            checkpoint: the newest valid checkpoint, if any.
            journal: reads the journal's records.
            journal_last_msg_seq: the last msg_seq in the journal (0: empty).
            term: the highest term this adapter had recorded (``RecordTerm``).
        """
        controls: list[Any] = []
        summary = recovery.recover_state(journal, checkpoint, self.state, self.sequencer, controls=controls)
        self.sessions.recovered(summary.session)
        purges = recovery.checkpoint_purges(checkpoint.state) if checkpoint is not None else []
        self.delayed.restore(purges + recovery.journal_purges(controls))
        self.pipeline.published_msg_seq = journal_last_msg_seq
        self._sync = replace(self._sync, published=journal_last_msg_seq, term=max(self._sync.term, term))
        if self.pipeline.journal is not None:
            self.pipeline.journal.resume(
                last_msg_seq=journal_last_msg_seq,
                last_source_seq=summary.last_source_seq,
                session=summary.session.id,
            )
        return summary

    # ---- what the runner asks ------------------------------------------------------------

    def next_deadline(self, now: float) -> float:
        """When :meth:`on_tick` must run next (never later than a tenth of a second)."""
        if self._woke:
            return now  # the timers skipped on waking are due: at once, once the sync bus is read
        deadline = min(next_deadline(self.sync, self.config.sync, now=now), now + TICK_AT_LEAST_EVERY_S)
        if self.sync.is_publishing:
            deadline = min(deadline, self.pipeline.output.heartbeat_due())
        if not self.sync.deciding and now < self._paused_until:
            deadline = min(deadline, self._paused_until)
        if self.gap_query is not None:
            deadline = min(deadline, self.gap_query.opened_at + ANSWER_TIMEOUT_S)
        delayed = self.delayed.deadline(now=now, wall_ns=self._wall_ns + round((now - self._now) * 1e9))
        if delayed is not None:
            deadline = min(deadline, delayed)
        return max(now, deadline)

    def on_delayed_records(self, records: Iterable[RecordLike], *, caught_up: bool) -> None:
        """Journal records the shell read for the delayed line (see :meth:`delayed_wants`)."""
        self.delayed.feed(records, caught_up=caught_up)

    def delayed_wants(self, *, wall_ns: int) -> int | None:
        """The msg_seq the shell's journal tailer should read from now (``None``: read nothing now)."""
        line = self.delayed.line
        if line is None or not line.wants(wall_ns=wall_ns):
            return None
        return line.read_from()

    def reads_source(self, now: float) -> bool:
        """Whether source frames should be read now (not while deciding, throttled, or at a fence)."""
        return not self.sync.deciding and now >= self._paused_until and not self.pipeline.deferred

    def sync_view(self) -> SyncView:
        """Role, sync status, term, position, health and lag, for the registry."""
        sync = self.sync
        lag = (
            max(0, self._active_position - self.sequencer.last_source_seq) if sync.role is Role.BACKUP else 0
        )
        behind = sync.status is SyncStatus.IN_SYNC and lag > self.config.sync.ahead_tolerance
        next_msg_seq = self.sequencer.next_msg_seq
        return SyncView(sync.role, sync.status, behind, sync.term, next_msg_seq, sync.health_score, lag)

    def status(self) -> dict[str, Any]:
        """Role, term, position and counters, for status replies and the final report."""
        sync, output, journal = self.sync, self.pipeline.output, self.pipeline.journal
        return {
            "adapter": self.config.adapter,
            "role": sync.role.value,
            "status": sync.status.value,
            "term": sync.term,
            "active": sync.active,
            "throttled": sync.throttled,
            "health": round(sync.health_score, 1),
            "next_msg_seq": self.sequencer.next_msg_seq,
            "last_source_seq": self.sequencer.last_source_seq,
            "digest": self.state.digest,
            "symbols": len(self.state),
            "fast_path": self.engine.is_native,
            **self.pipeline.counters.as_dict(),
            "sync_garbage": self.sync_garbage,
            "snapshots_sent": self.snapshots_sent,
            "packets": output.packets,
            "heartbeats": output.heartbeats,
            "dropped_packets": output.dropped_packets,
            "published_msg_seq": self.pipeline.published_msg_seq,
            "gate": self.pipeline.gate.counters.as_dict(),
            "journal_last_msg_seq": None if journal is None else journal.last_msg_seq,
            "journaled": 0 if journal is None else journal.journaled,
            "journal_skipped": 0 if journal is None else journal.skipped,
            "checkpoints": 0 if journal is None else journal.checkpoints,
            "gaps": dict(self.gap_counts),
            "unpublished_at_promotion": self.unpublished_at_promotion,
            "gap_pending": None if self.gaps.pending is None else str(self.gaps.pending),
            **self.sessions.status(),
            **self.delayed.status(),
        }

    # ---- the sync rules (also the pipeline's SyncPort) -------------------------------------

    @property
    def sync(self) -> SyncState:
        """The sync rules' state of this adapter."""
        return self._sync

    @sync.setter
    def sync(self, state: SyncState) -> None:
        # Whether this adapter publishes is asked once per run of the source
        # path: kept as a plain attribute, refreshed whenever the state changes.
        old = self._sync
        self._sync = state
        self.is_publishing = state.is_publishing
        if old.role is not state.role:
            self._gate_follows_role(old.role, state.role)
            self.sessions.on_role_changed(old.role, state.role)
        if state.term > old.term:
            self._out.append(RecordTerm(state.term))  # a restart must never go back to a lower term

    @property
    def is_backup(self) -> bool:
        return self.sync.role is Role.BACKUP

    @property
    def term(self) -> int:
        return self.sync.term

    def apply(self, event: SyncEvent) -> None:
        """Feed one event to the sync rules and turn their actions into the core's."""
        if type(event) is SnapshotAdopted:
            self._gap_covered(event.source_seq)
        elif type(event) is ArrivalChecked and self.gaps.pending is not None:
            gap, at = self.gaps.pending, self.sequencer.last_recorded_source_seq
            self._settled(self.gaps.on_report(at=at, same_numbering=not event.renumbered), gap)
        was_publishing = self.sync.is_publishing
        self.sync, actions = on_event(self.sync, event, now=self._now, config=self.config.sync)
        if was_publishing and not self.sync.is_publishing:
            self.pipeline.unpublish()  # failed: nothing unconfirmed goes out any more
        for action in actions:
            _SYNC_ACTIONS[type(action)](self, action)

    def _gate_follows_role(self, old: Role, new: Role) -> None:
        pipeline = self.pipeline
        if new is Role.ACTIVE:
            pipeline.open_gate(out=self._out)  # our numbering is the channel's now
        elif old is Role.ACTIVE:
            # What we numbered as the active goes out as it was; what follows waits for the new active.
            pipeline.seal(now=self._now, wall_ns=self._wall_ns, out=self._out)
            pipeline.gate.close(confirmed=self.sequencer.last_recorded_source_seq, trusted=True)

    def _gate_on_report(self, verdict: ReportVerdict, at: int) -> None:
        # The active's report is the only word on whether what we numbered may go out.
        gate = self.pipeline.gate
        gate.heard()
        if verdict is ReportVerdict.MATCH:
            self.pipeline.confirm(at, out=self._out)
        elif verdict in (ReportVerdict.NUMBERING_MISMATCH, ReportVerdict.DIGEST_MISMATCH):
            self.pipeline.unpublish()

    def _release_if_active_silent(self, now: float) -> None:
        # The active stopped reporting (dead or stalled): keep the stream flowing on our
        # line while the group elects, as an in-sync backup always did.
        sync, gate = self.sync, self.pipeline.gate
        if sync.role is not Role.BACKUP or not sync.is_in_sync:
            return  # not confirmed, or a gap of ours is not settled: nothing goes out unasked
        if gate.passes or not gate.is_trusted:
            return
        heard = max(sync.reported_at or 0.0, sync.active_heard_at or 0.0, sync.demoted_at or 0.0)
        if now - heard > self.config.silence_release_s:
            self.pipeline.release(out=self._out, provisional=True)

    # ---- source gaps (adapter.core.gaps) -------------------------------------------------

    def on_gap(self, gap: Gap, *, jump: bool) -> bool:
        """The pipeline found source messages ``gap`` missing; True: hold there, the group is asked."""
        sync = self.sync
        if sync.role is Role.ACTIVE:
            return self._active_gap(gap, jump=jump)
        if sync.role is Role.BACKUP:
            self._backup_gap(gap)
        return False

    def _active_gap(self, gap: Gap, *, jump: bool) -> bool:
        if jump or gap == self._gap_passed:
            self._gap_passed = None  # a believed jump is everybody's; an answered gap is passed
            return False
        waiting = self._backups(in_sync_only=True)
        if not waiting:
            return False  # nobody in sync to ask: the gap is everybody's that matters
        self.gap_query = GapQuery(gap, self._now, waiting)
        self.gap_counts["asked"] += 1
        logger.info(
            "adapter %d: source messages %s missing; asking backups %s before numbering past them",
            self.config.adapter,
            gap,
            sorted(waiting),
        )
        self._out.append(SendSync(syncbus.GapQuery(self._sender(), gap.first, gap.last)))
        return True

    def _backup_gap(self, gap: Gap) -> None:
        local = self._gap_local
        if local is not None and local.covers(gap):
            # We handed the role over for this gap: it is ours alone.
            self._gap_local = None
            self._settled(Settlement.LOCAL, gap)
        elif self.gaps.on_own_gap(gap) is Settlement.OPEN:
            self.apply(GapPending())
        else:
            self.gap_counts["common"] += 1

    def _settle_gap_by_report(self, at: int, verdict: ReportVerdict) -> None:
        # Same msg_seq past the gap: the active converted none of what we missed (every
        # message that changes the state gets one), so our state lacks nothing.
        gap = self.gaps.pending
        if gap is None:
            return
        same = {
            ReportVerdict.MATCH: True,
            ReportVerdict.DIGEST_MISMATCH: True,
            ReportVerdict.NUMBERING_MISMATCH: False,
        }.get(verdict)
        self._settled(self.gaps.on_report(at=at, same_numbering=same), gap)

    def _settled(self, settlement: Settlement, gap: Gap) -> None:
        if settlement is Settlement.COMMON:
            self.gap_counts["common"] += 1
            self.apply(GapSettled(common=True))
        elif settlement is Settlement.LOCAL:
            self.gap_counts["local"] += 1
            logger.info(
                "adapter %d: missed source messages %s that the active has; repairing from a snapshot",
                self.config.adapter,
                gap,
            )
            self.pipeline.distrust(gap.first - 1)
            self.apply(GapSettled(common=False, missing=gap.size))

    def _on_gap_message(
        self, msg: syncbus.GapQuery | syncbus.GapAnswer | syncbus.Handover, *, from_active: bool
    ) -> None:
        sync = self.sync
        if isinstance(msg, syncbus.GapQuery):
            if from_active:
                if self.gaps.on_query(Gap(msg.first, msg.last)) is Settlement.COMMON:
                    self.gap_counts["common"] += 1
                    self.apply(GapSettled(common=True))
                self._answer_gaps()
        elif isinstance(msg, syncbus.GapAnswer):
            query = self.gap_query
            if (
                query is not None
                and sync.role is Role.ACTIVE
                and msg.sender.term == sync.term
                and (msg.first, msg.last) == (query.gap.first, query.gap.last)
            ):
                self.gap_query = query.answered(msg.sender.adapter, msg.has_messages)
        else:
            self.apply(HandoverHeard(msg.sender.adapter, msg.sender.term, msg.target, msg.reason))

    def _answer_gaps(self) -> None:
        # A backup answers the active's question once it has passed the gap. It offers the
        # messages only if its line can carry them: confirmed, nothing of its own unsettled.
        if self.sync.role is not Role.BACKUP:
            return
        sync, pipeline = self.sync, self.pipeline
        trusted = sync.is_in_sync and pipeline.suspect_after is None
        for gap in self.gaps.due_answers(position=self.sequencer.last_source_seq):
            has = trusted and self.sequencer.recorded_within(gap.first, gap.last)
            self._out.append(SendSync(syncbus.GapAnswer(self._sender(), gap.first, gap.last, has)))

    def _decide_gap(self) -> None:
        query = self.gap_query
        if query is None:
            return
        if self.sync.role is not Role.ACTIVE:
            self.gap_query = None  # no longer the active: what waited is converted as a backup
            self.pipeline.release_gap(now=self._now, wall_ns=self._wall_ns, out=self._out)
            return
        verdict, target = decide(query, now=self._now, live=self._backups(in_sync_only=False))
        if verdict is QueryVerdict.WAIT:
            return
        self.gap_query = None
        if verdict is QueryVerdict.HAND_OVER and target is not None:
            self.gap_counts["handed_over"] += 1
            self._gap_local = query.gap
            self.apply(HandOver(target, f"missed source messages {query.gap} that backup {target} has"))
        else:
            if verdict is QueryVerdict.TIMED_OUT:
                logger.warning(
                    "adapter %d: no answer about source messages %s from every backup in %.2fs; numbering on",
                    self.config.adapter,
                    query.gap,
                    ANSWER_TIMEOUT_S,
                )
            self.gap_counts["common"] += 1
            self._gap_passed = query.gap
        self.pipeline.release_gap(now=self._now, wall_ns=self._wall_ns, out=self._out)

    def _gap_covered(self, at: int) -> None:
        # A snapshot of the active's state at or past our pending gap makes the gap moot.
        gap = self.gaps.pending
        if gap is not None and at >= gap.last:
            self.gaps.pending = None
            self.apply(GapSettled(common=True))

    def _backups(self, *, in_sync_only: bool) -> frozenset[int]:
        sync, now = self.sync, self._now
        return frozenset(
            peer.adapter
            for peer in sync.peers.values()
            if peer.role is Role.BACKUP
            and now - peer.last_seen <= ASK_RECENT_S
            and (peer.in_sync or not in_sync_only)
        )

    # ---- what the session driver uses ------------------------------------------------------

    @property
    def now(self) -> float:
        return self._now

    @property
    def wall_ns(self) -> int:
        return self._wall_ns

    @property
    def out(self) -> list[Action]:
        """The actions of the input being handled (the session driver adds to them)."""
        return self._out

    def sender(self) -> syncbus.Sender:
        return syncbus.Sender(self.config.adapter, self.sync.term, self.sync.role, self._wall_ns)

    def report_now(self) -> None:
        """Send our stream state now (the active), not at the next heartbeat."""
        if self.sync.role is Role.ACTIVE:
            self._send_stream_state(None)

    def session_rolled(self, boundary: Boundary, msg_seq: int) -> None:
        self.sessions.on_rolled(boundary, msg_seq)

    def session_adopted(self, snapshot: syncbus.Snapshot) -> None:
        self.sessions.on_adopted(snapshot)

    _sender = sender

    def _purge_context(self) -> PurgeContext:
        journal = self.pipeline.journal
        last = None if journal is None else journal.last_msg_seq
        return self.delayed.context(
            self.sync, self._sender(), now=self._now, wall_ns=self._wall_ns, journal_last=last
        )

    def _send_stream_state(self, action: SyncAction | None) -> None:
        seq = self.sequencer
        message = syncbus.StreamState(
            self._sender(),
            self.config.source_stream_number,
            seq.next_msg_seq,
            seq.next_source_seq,
            seq.last_recorded_source_seq,
            seq.last_msg_seq,
            seq.last_digest,
            **self.sessions.report_fields(),
            purge_seq=self.delayed.desk.book.highest_id,
        )
        self._out.append(SendSync(message))

    def _send_health(self, action: SyncAction) -> None:
        counters, now = self.pipeline.counters, self._now
        timeout = self.config.sync.peer_timeout_s
        fresh = [rate for rate, heard in self._peer_rates.values() if now - heard <= timeout]
        sample = self.health.measure(
            now=now,
            numbered=counters.numbered,
            errors=counters.errors,
            lag=self.sync_view().lag,
            group_rate=max(fresh, default=0.0),
        )
        self.apply(HealthMeasured(health_score(sample), self.pipeline.published_msg_seq))
        sync = self.sync
        message = syncbus.Health(
            self._sender(),
            sync.health_score,
            sample.available_memory_mb,
            sample.cpu_percent,
            sample.error_count,
            sample.message_rate,
            sample.lag,
            sync.is_in_sync,
            len(sync.desyncs),
            self.pipeline.published_msg_seq,
            self.delayed.desk.book.known_through,
            0 if self.delayed.line is None else self.delayed.line.published_seq,
        )
        self._out.append(SendSync(message))

    def _request_snapshot(self, action: SyncAction) -> None:
        assert isinstance(action, RequestSnapshot)
        self._out.append(SendSync(syncbus.SnapshotRequest(self._sender(), action.target)))

    def _send_snapshot(self, action: SyncAction) -> None:
        seq = self.sequencer
        at, stream = seq.last_recorded_source_seq, self.config.source_stream_number
        symbols, session = self.state.snapshot(), self.sessions.snapshot_fields()
        message = syncbus.Snapshot(self._sender(), stream, at, seq.next_msg_seq, symbols, **session)
        self._out.append(SendSync(message))
        self.snapshots_sent += 1

    def _role_changed(self, action: SyncAction) -> None:
        assert isinstance(action, RoleChanged)
        next_msg_seq = self.sequencer.next_msg_seq
        old, new = action.old.value, action.new.value
        logger.info(
            "adapter %d: %s -> %s, term %d, next msg_seq %d (%s)",
            *(self.config.adapter, old, new, action.term, next_msg_seq, action.reason),
        )
        self.pipeline.seal(now=self._now, wall_ns=self._wall_ns, out=self._out)
        fields = {"old": old, "new": new, "term": action.term, "reason": action.reason}
        if action.new is Role.ACTIVE:
            # Everything numbered went out when the gate opened: the new active goes on from
            # the first msg_seq it has not published. A hole here means output was discarded
            # before the promotion (a forced one): reported, and the journals fill it.
            unpublished = self.sequencer.last_msg_seq - self.pipeline.published_msg_seq
            if unpublished > 0 and self.pipeline.published_msg_seq:
                self.unpublished_at_promotion += unpublished
                logger.warning(
                    "adapter %d: promoted with %d numbered messages it had not published (msg_seq %d..%d)",
                    self.config.adapter,
                    unpublished,
                    self.pipeline.published_msg_seq + 1,
                    self.sequencer.last_msg_seq,
                )
            fields["unpublished"] = max(0, unpublished)
        self._out.append(Status("role", {**fields, "next_msg_seq": next_msg_seq}))

    def _send_handover(self, action: SyncAction) -> None:
        assert isinstance(action, SendHandover)
        # Sent as the active's last word, so a backup that hears it still follows us
        # (a backup's word from its active would make it elect at once).
        sender = syncbus.Sender(self.config.adapter, self.sync.term, Role.ACTIVE, self._wall_ns)
        self._out.append(SendSync(syncbus.Handover(sender, action.target, action.reason)))

    def _send_failed(self, action: SyncAction) -> None:
        assert isinstance(action, SendFailed)
        self._out.append(SendSync(syncbus.Failed(self._sender(), action.reason)))

    def _command_rejected(self, action: SyncAction) -> None:
        assert isinstance(action, CommandRejected)
        logger.warning("command %s rejected: %s", action.kind.value, action.reason)
        self._rejection = f"{action.kind.value} rejected: {action.reason}"

    # ---- plumbing ---------------------------------------------------------------------

    def _throttle(self, converted: int) -> None:
        # Rule 3 (a backup ahead pauses after every k messages) and the operator's rate cap.
        pause = 0.0
        if self.sync.throttled:
            cfg = self.config.sync
            pause = converted * cfg.throttle_pause_s / cfg.throttle_every
        if self._rate_limit:
            pause = max(pause, converted / self._rate_limit)
        if pause:
            self._paused_until = self._now + min(pause, MAX_PAUSE_S)

    def _fault(self, where: str) -> None:
        # One fault is contained; a fault that keeps coming back means this
        # adapter cannot be trusted: it goes off line once (and stays up, so
        # nothing restarts it into the same fault again and again).
        self._faults.append(self._now)
        repeated = len(self._faults) == FAULT_LIMIT and self._now - self._faults[0] <= FAULT_WINDOW_S
        if repeated and self.sync.role is not Role.FAILED:
            reason = f"{FAULT_LIMIT} internal faults in {FAULT_WINDOW_S:g}s (the last {where})"
            self.apply(OperatorCommand(CommandKind.FAIL, reason))

    def _clock(self, now: float, wall_ns: int) -> None:
        self._woke = now - self._now > WOKE_AFTER_S
        self._now, self._wall_ns = now, wall_ns

    def _take(self) -> list[Action]:
        out, self._out = self._out, []
        return out


_SYNC_ACTIONS: Final[Mapping[type, Callable[[AdapterCore, SyncAction], None]]] = {
    SendStreamState: AdapterCore._send_stream_state,
    SendHealth: AdapterCore._send_health,
    RequestSnapshot: AdapterCore._request_snapshot,
    SendSnapshot: AdapterCore._send_snapshot,
    RoleChanged: AdapterCore._role_changed,
    SendFailed: AdapterCore._send_failed,
    SendHandover: AdapterCore._send_handover,
    CommandRejected: AdapterCore._command_rejected,
}


def _peer_heard(msg: syncbus.SyncMessage) -> PeerHeard:
    sender = msg.sender
    if isinstance(msg, syncbus.Health):
        return PeerHeard(
            sender.adapter, sender.role, sender.term, msg.score, msg.in_sync, msg.published_msg_seq
        )
    return PeerHeard(sender.adapter, sender.role, sender.term)
