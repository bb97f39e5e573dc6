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
a control-socket request (bytes)    :meth:`AdapterCore.on_control` (its reply is an action)
an admin server command             :meth:`AdapterCore.on_admin` (its reply is an action)
the machine's figures               :meth:`AdapterCore.on_machine_sample`
the journal at start-up             :meth:`AdapterCore.recover`
==================================  =========================================================

The core is a router: each input goes to the part that decides about it --
the :class:`~adapter.core.pipeline.Pipeline` (conversion, numbering; its
:class:`~adapter.core.emitter.LineEmitter` puts packets and journal records
behind the output gate), the sync rules (:func:`adapter.core.sync.on_event`),
the :class:`~adapter.core.session_driver.SessionDriver`, the
:class:`~adapter.core.gaps.GapDesk`, the delayed side -- and what comes back
(actions, interrupts of the pipeline, :mod:`~adapter.core.steps` of the
other parts) is carried out here, in order, into the one list of actions of
that input (a :class:`~adapter.core.pipeline.Turn`). No part holds a pointer
to the core. The runner asks :meth:`AdapterCore.next_deadline` when to call
``on_tick`` again, :meth:`AdapterCore.reads_source` and
:meth:`AdapterCore.reads_control` whether to read those sockets now, and
:meth:`AdapterCore.view` for the immutable :class:`CoreView` other threads read.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any, Final

from feedha.adapter.conversion.budget import adopted_budget
from feedha.adapter.conversion.engine import ConversionEngine
from feedha.adapter.core import pumping, recovery, syncbus
from feedha.adapter.core.access_desk import AccessChange, AccessDesk, SealChange
from feedha.adapter.core.actions import (
    Action,
    CommandDone,
    Publish,
    PublishConflated,
    ReadSync,
    RecordTerm,
    ReplyAdmin,
    ReplyControl,
    SampleMachine,
    SendSync,
    Status,
)
from feedha.adapter.core.busy import BusyDesk
from feedha.adapter.core.commands import (
    Busy,
    Command,
    ControlError,
    CorruptState,
    DropPackets,
    EndSession,
    Penalty,
    Purge,
    RoleCommand,
    ShowStatus,
    Throttle,
    decode_request,
)
from feedha.adapter.core.config import MAX_PAUSE_S, CoreConfig
from feedha.adapter.core.conflated_side import ConflatedSide
from feedha.adapter.core.delayed_side import DelayedSide
from feedha.adapter.core.emitter import LineEmitter
from feedha.adapter.core.gaps import GapDesk, GapView
from feedha.adapter.core.health import HealthMeter, MachineSample, health_score
from feedha.adapter.core.journaling import JournalPlan
from feedha.adapter.core.output import LineOutput
from feedha.adapter.core.pipeline import (
    Adopted,
    Arrived,
    Conversion,
    GapFound,
    Interrupt,
    Pipeline,
    Reply,
    Rolled,
    Standing,
    Turn,
)
from feedha.adapter.core.pumping import Pumped, PumpMode, PumpPlan, PumpStop
from feedha.adapter.core.purging import PurgeContext
from feedha.adapter.core.records import RecordLike
from feedha.adapter.core.sequencer import PositionReport, ReportVerdict
from feedha.adapter.core.session_driver import SessionDriver, SessionView
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
    HeartbeatSent,
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
from feedha.adapter.core.views import CoreView, SyncView, core_status

logger = logging.getLogger(__name__)

__all__ = ["AdapterCore", "CoreView", "SyncView"]

TICK_AT_LEAST_EVERY_S: Final = 0.1
# Longer than this between two calls and the process was not running (stopped, swapped out):
# what the group said meanwhile waits unread, so no election is held before it is heard.
WOKE_AFTER_S: Final = 2 * TICK_AT_LEAST_EVERY_S
MACHINE_SAMPLE_S: Final = 0.1  # how often CPU is measured (for the health score)
# How often the machine's available memory is measured with it: reading it costs a file of the
# kernel's parsed in Python (~60 µs warm), on the loop's thread, and it moves slowly.
MEMORY_SAMPLE_S: Final = 1.0
# A backup whose output waits at its gate reads the source at most this often (see on_source_drained).
BACKUP_READ_INTERVAL_S: Final = 0.001
FAULT_LIMIT: Final = 5  # internal faults within FAULT_WINDOW_S that make the adapter fail itself
FAULT_WINDOW_S: Final = 60.0


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
        output = LineOutput(
            channel=config.channel_number,
            adapter=config.adapter,
            max_packet_bytes=config.max_packet_bytes,
            heartbeat_s=config.line_heartbeat_s,
        )
        journal = None
        if config.journal:
            every, interval = config.checkpoint_every, config.checkpoint_interval_s
            stream = config.source_stream_number
            journal = JournalPlan(
                source_stream=stream, checkpoint_every=every, checkpoint_interval_s=interval, now=now
            )
        self.emitter = LineEmitter(output, journal, source_stream=config.source_stream_number)
        self.emitter.close(confirmed=0, trusted=False)  # every adapter starts as a backup that listens
        self.pipeline = Pipeline(
            engine,
            self.emitter,
            source_stream=config.source_stream_number,
            max_source_gap=config.max_source_gap,
            jump_confirm=config.jump_confirm,
        )
        self.engine, self.state, self.sequencer = engine, engine.state, self.pipeline.sequencer
        self.sessions = SessionDriver(config.adapter, config.session_schedule)
        self.state.session = self.sessions.keeper.session.id
        self.gaps = GapDesk(config.adapter)
        self.access = AccessDesk()  # when data-plane access changes take effect
        self.busy = BusyDesk()  # busy turns on purpose (fault injection)
        self.health = HealthMeter(penalty=config.health_penalty, now=now)
        self.delayed = DelayedSide(config, now=now)  # the delayed line and the group's purges
        self.conflated = ConflatedSide(  # the conflation intervals (and the conflated line)
            config.conflate_interval_s,
            channel=config.channel_number,
            adapter=config.adapter,
            max_packet_bytes=config.max_packet_bytes,
            heartbeat_s=config.line_heartbeat_s,
        )
        self.sync_garbage = self.snapshots_sent = self.unpublished_at_promotion = 0
        self._active_position = 0  # the last source_seq the active reported
        self._paused_until = 0.0
        self._next_read = 0.0  # a backup whose output waits reads the source again from then
        self._rate_limit = 0.0  # operator throttle, messages/s (0: none)
        self._rejection: str | None = None
        self._faults: deque[float] = deque(maxlen=FAULT_LIMIT)
        self._peer_rates: dict[int, tuple[float, float]] = {}  # adapter -> (message rate, heard at)
        self._peer_lags: dict[int, tuple[int, float]] = {}  # a backup -> (its lag, heard at)
        self._control_waiting = ""  # the command id of the control request whose reply is deferred
        self._controls = 0  # control requests numbered so far (their command ids)
        self._deferred = 0  # commands whose reply comes later (a purge waiting for acks)
        self._view: CoreView | None = None
        self._now = now
        self._wall_ns = 0
        self._woke = False  # the process did not run for a while before this input
        # pump_report's parts, with the fields they were serialized from
        self._report_parts: tuple[tuple[int, ...], syncbus.ReportParts] | None = None
        self._next_sample = now  # when the machine's figures are measured next
        self._next_memory_sample = now  # when the available memory is measured with them next

    def __repr__(self) -> str:
        sync = self.sync
        return (
            f"<AdapterCore [adapter={self.config.adapter}, role={sync.role.value}, "
            f"status={sync.status.value}, term={sync.term}, next_msg_seq={self.sequencer.next_msg_seq}]>"
        )

    # ---- inputs -----------------------------------------------------------------------

    def on_source(
        self,
        parts: list[bytes],
        *,
        now: float,
        wall_ns: int,
        frame: bytes | None = None,
        start: int = 0,
        converted: int = 0,
    ) -> list[Action]:
        """One ZeroMQ message from the source: ``[topic, frame]``; a frame carries FIX messages.

        ``frame``, ``start`` and ``converted``: the source pump stopped in ``frame`` (what it
        converted of ``parts``) at byte ``start`` after converting (and booking) ``converted``
        of its messages; the rest goes on here (:meth:`on_pumped`).
        """
        turn = self._turn(now, wall_ns)
        counters = self.pipeline.counters
        if len(parts) != 2:
            counters.malformed_frames += 1
            detail, data = f"a message of {len(parts)} parts", b"".join(parts)
            self.pipeline.quarantine("malformed_frame", None, detail, data, turn)
            self.pipeline.ledger.placed_nowhere()
            return turn.out
        faults = counters.internal_errors
        if frame is None:
            frame = self.engine.source_frame(parts[1])  # itch50: MoldUDP64 -> records
        conversion = self.pipeline.convert(frame, self._standing(), turn, start=start, before=converted)
        converted = self._drive(conversion, turn)  # what got a msg_seq here
        pipeline = self.pipeline
        if pipeline.pending_roll is not None and pipeline.at_fence():
            self._drive(pipeline.commit(pipeline.pending_roll, self._standing(), turn), turn)
        if self.gaps.backup.owed:  # answers owed (an attribute: this runs on every source frame)
            self._carry(self.gaps.answers(self._gap_view()), turn)
        if converted and self.is_throttled():
            self._throttle(converted)
        if counters.internal_errors > faults:
            self._fault("converting a source frame", turn)
        if converted and self._sync.role is Role.BACKUP:
            turn.out.append(ReadSync())  # heartbeats that came meanwhile count before the timers
        if self.conflated.enabled:
            self.conflated.observe(turn.out)
        if converted and self.busy.blocks_pump:
            return self._busy_conversion(turn)
        return turn.out

    def _busy_conversion(self, turn: Turn) -> list[Action]:
        # An armed busy turn (fault injection) in this conversion turn: after numbering, before
        # or (``report``) after what it publishes (sealed now), before its sync-bus messages.
        if self.busy.wants("report"):
            turn.out += self.pipeline.seal(self._sync.term, turn)
        return self.busy.place(turn.out)

    def on_source_drained(self, *, now: float, wall_ns: int) -> list[Action]:
        """The runner read every source frame that was waiting: what is ready goes out now.

        The packet being filled is sealed at once, before any timer of the turn
        (:meth:`on_tick` would seal it too, after the timers): a message waits for
        nothing once nothing more is there to read. A packet fills across frames only
        while frames keep coming (a burst).

        A backup whose output waits at its gate (for the active's report, every
        heartbeat interval) reads the source again only :data:`BACKUP_READ_INTERVAL_S`
        later, and then everything queued meanwhile: its line runs a report behind the
        active's anyway, so waking for every frame would buy no subscriber anything and
        cost a core's share per backup at low rates. Once its output goes straight out
        (promoted, or released while the active is silent) it reads every frame as it
        comes again (:meth:`_batches_source` is asked each time). The source pump keeps
        the same pace inside one call (:meth:`source_batch`), until the report comes.
        """
        turn = self._turn(now, wall_ns)
        if self._batches_source():
            self._next_read = now + BACKUP_READ_INTERVAL_S
        turn.out += self.pipeline.seal(self._sync.term, turn)
        if self.conflated.enabled:
            self.conflated.observe(turn.out)
        return turn.out

    def keepalive_report(self, now: float, *, snapshot_asked: bool = False) -> syncbus.StreamState | None:
        """The active's report to repeat while one long turn keeps its loop from reporting, or ``None``.

        A turn that writes a checkpoint (due at ``now``), or answers a snapshot request
        (``snapshot_asked``), folds the whole conversion state: with an order table of 100,000
        orders that took 0.66 s of the loop, past the heartbeat timeout, and every backup elected a
        new active. The shell repeats this report meanwhile (:meth:`SyncLink.keepalive
        <adapter.sync_link.SyncLink.keepalive>`): the active's positions do not move during the
        turn, so it says what an idle active says. ``None``: not the active, or no long turn ahead.
        """
        if self._sync.role is not Role.ACTIVE or self._sync.deciding:
            return None
        journal = self.emitter.journal
        long_tick = self.busy.wants("tick") or (journal is not None and journal.is_checkpoint_due(now))
        if snapshot_asked or long_tick:
            return self._stream_state()
        return None

    def on_checkpoint_cost(self, seconds: float) -> None:
        """The turn that wrote the last checkpoint took ``seconds`` (the next waits ten times that)."""
        journal = self.emitter.journal
        if journal is not None:
            journal.note_cost(seconds)

    def pump_plan(self, now: float) -> PumpPlan | None:
        """Whether the source pump may run now, and within what (:mod:`adapter.core.pumping`)."""
        return pumping.plan(self, now)

    def pump_report(self) -> pumping.PumpReport | None:
        """The active's heartbeat reports for the source pump to send while it runs (``None``: not now).

        Only an active past its decision whose reports carry nothing but its positions: a
        conflation boundary it proposes goes out from the core's turn (and the pump does not run
        with a conflated line anyway).
        """
        sync, seq = self.sync, self.sequencer
        if sync.role is not Role.ACTIVE or sync.deciding or self._woke:
            return None
        proposed, committed_k = self.conflated.report_fields()
        if proposed:
            return None
        # The parts are serialized again only when a field in them moved (a term, a session, a purge).
        fixed = (
            sync.term,
            *self.sessions.report_fields().values(),
            self.delayed.desk.book.highest_id,
            committed_k,
        )
        if self._report_parts is None or self._report_parts[0] != fixed:
            parts = syncbus.report_parts(self._stream_state(), channel=self.config.channel_number)
            self._report_parts = (fixed, parts)
        return pumping.PumpReport(
            due=sync.next_heartbeat_at,
            every=self.config.sync.heartbeat_interval_s,
            parts=self._report_parts[1],
            next_source_seq=seq.next_source_seq,
            last_source_seq=seq.last_recorded_source_seq,
            last_msg_seq=seq.last_msg_seq,
            digest=seq.last_digest,
        )

    def pump_journal(self, append: pumping.AppendBatch) -> Callable[[int, int, int, list[bytes]], None]:
        """The source pump's journal callback: each ``SEND`` run booked here, written by ``append``.

        ``append`` is the journal writer's ``append_batch`` (:func:`adapter.core.pumping.journal_writer`).
        """
        return pumping.journal_writer(self, append)

    def on_pumped(self, pumped: Pumped, mode: PumpMode, *, now: float, wall_ns: int) -> list[Action]:
        """The source pump came back from a run in ``mode``: book what it converted, numbered and sealed.

        A source message it stopped at (one it does not take whole) goes on here from where
        it stopped, as :meth:`on_source` takes it, and what is ready then goes out. A run that
        came back having drained the source read all there was (:meth:`on_source_drained`). The
        heartbeat reports it sent (:meth:`pump_report`) count as the sync rules' heartbeats.
        """
        turn = self._turn(now, wall_ns)
        out, reached = pumping.settle(self, pumped, mode)
        if pumped.reports:  # its heartbeat reports are the sync rules' own: the next is due after the last
            self.apply(HeartbeatSent(pumped.last_report_ns / 1e9), turn)
        if reached:
            self._drive(self.pipeline.reached(reached, self._standing(), turn), turn)
            out += turn.out
            turn.out.clear()
        if pumped.leftover is not None:
            out += self.on_source(
                pumped.leftover,
                now=now,
                wall_ns=wall_ns,
                frame=pumped.leftover_frame,
                start=pumped.leftover_pos,
                converted=pumped.leftover_converted,
            )
            return out + self.pipeline.seal(self._sync.term, turn)
        if pumped.stop in (PumpStop.DEADLINE, PumpStop.DRAINED):
            out += self.on_source_drained(now=now, wall_ns=wall_ns)
        return out

    def is_throttled(self) -> bool:
        """Whether the source is read at a reduced rate (rule 3's throttle, or an operator's)."""
        return self._sync.throttled or bool(self._rate_limit)

    def on_journal_refused(self, first_msg_seq: int, last_msg_seq: int) -> None:
        """The runner's journal failed to write these numbered messages: they stay off this line.

        The runner raises the error afterwards, and it is booked as a fault (:meth:`on_fault`).
        """
        self.emitter.refuse(first_msg_seq, last_msg_seq)

    def on_fault(self, where: str, *, now: float, wall_ns: int) -> list[Action]:
        """The runner caught an unexpected exception in a handler (a bug): count it, fail if it repeats."""
        turn = self._turn(now, wall_ns)
        self.pipeline.counters.internal_errors += 1
        self._fault(where, turn)
        return turn.out

    def on_sync(self, msg: syncbus.SyncMessage, *, now: float, wall_ns: int) -> list[Action]:
        """One message from a peer on the sync bus."""
        turn = self._turn(now, wall_ns)
        sender = msg.sender
        if sender.adapter == self.config.adapter:
            return turn.out
        self.apply(_peer_heard(msg), turn)
        if isinstance(msg, syncbus.Health):
            self._peer_rates[sender.adapter] = (msg.message_rate, now)
            if sender.role is Role.BACKUP:
                self._peer_lags[sender.adapter] = (msg.lag, now)
            else:
                self._peer_lags.pop(sender.adapter, None)
        sync = self.sync
        from_active = sender.adapter == sync.active and sender.term == sync.term and sync.role is Role.BACKUP
        if isinstance(msg, syncbus.StreamState) and from_active:
            self._on_report(msg, turn)
        elif isinstance(msg, syncbus.SnapshotRequest):
            self.apply(SnapshotRequested(sender.adapter, msg.target_adapter), turn)
        elif isinstance(msg, syncbus.Snapshot) and from_active and self._wants_snapshot():
            self._adopt_now(msg, turn)
        elif isinstance(msg, syncbus.SessionAck):
            self._carry(self.sessions.on_ack(self._session_view(), msg), turn)
        elif isinstance(msg, syncbus.GapQuery | syncbus.GapAnswer | syncbus.Handover):
            self._carry(self.gaps.on_message(self._gap_view(), msg, from_active=from_active), turn)
        if isinstance(msg, syncbus.StreamState | syncbus.Purges | syncbus.PurgeAck | syncbus.Health):
            self.delayed.on_sync(msg, self._purge_context(), turn.out, from_active=from_active)
        self._carry(self.gaps.decide(self._gap_view()), turn)
        self._conflate_sync(msg, turn)
        return self._replies(turn)

    def _conflate_sync(self, msg: syncbus.SyncMessage, turn: Turn) -> None:
        # The conflation protocol's part of a sync message, after what it released on the line.
        side, sync = self.conflated, self.sync
        side.observe(turn.out)
        if isinstance(msg, syncbus.ConflateAck) and sync.role is Role.ACTIVE:
            side.on_ack(msg, now=turn.now)
        elif (
            isinstance(msg, syncbus.StreamState)
            and msg.sender.role is Role.ACTIVE
            and msg.sender.term >= sync.term
            and sync.role is not Role.ACTIVE
        ):
            published = self.emitter.published_msg_seq
            actions = side.on_report(msg, self._sender(), published_seq=published, now=turn.now)
            publishing = sync.is_publishing
            turn.out += [a for a in actions if publishing or type(a) is not PublishConflated]

    def on_sync_garbage(self) -> None:
        """A sync-bus frame that did not decode (counted, nothing else)."""
        self.sync_garbage += 1

    def on_tick(self, *, now: float, wall_ns: int) -> list[Action]:
        """The loop went round: seal the packet being filled and fire whatever timer is due."""
        turn = self._turn(now, wall_ns)
        if now >= self._next_sample:
            self._next_sample = now + MACHINE_SAMPLE_S
            memory = now >= self._next_memory_sample
            if memory:
                self._next_memory_sample = now + MEMORY_SAMPLE_S
            turn.out.append(SampleMachine(memory=memory))
        turn.out += self.access.on_tick(now=now, wall_ns=wall_ns)
        turn.out += self.pipeline.seal(self._sync.term, turn)
        journal = self.emitter.journal
        if journal is not None:
            checkpoint = journal.checkpoint(
                now=now,
                last_source_seq=self.sequencer.last_source_seq,
                symbols=self.state.snapshot,
                session=self.sessions.keeper.session,
                purges=self.delayed.desk.book.entries,
            )
            if checkpoint is not None:
                turn.out.append(checkpoint)
        if now >= next_deadline(self.sync, self.config.sync, now=now) and not self._woke:
            self.apply(Tick(behind_report=self.sequencer.has_pending), turn)
        # Views are built only for a part with work to do: this runs on every turn of the loop.
        if self.gaps.query is not None:
            self._carry(self.gaps.decide(self._gap_view()), turn)
        if self._sync.role is Role.ACTIVE and self.sessions.has_work(now=now, wall_ns=wall_ns):
            self._carry(self.sessions.tick(self._session_view()), turn)
        self._release_if_active_silent(turn)
        if self.delayed.has_work(self._sync.role):
            self.delayed.on_tick(self._purge_context(), turn.out)
        self._line_heartbeat(turn)
        self._conflate_tick(turn)
        if self.busy.wants("tick"):
            return self.busy.place(self._replies(turn))  # a long timer turn (fault injection)
        return self._replies(turn)

    def _conflate_tick(self, turn: Turn) -> None:
        side, sync = self.conflated, self._sync
        if not side.enabled:
            return
        side.observe(turn.out)
        if not sync.is_publishing:
            return  # what became due goes out once this adapter publishes again
        actions, proposed = side.on_tick(
            role=sync.role,
            peers=sync.peers,
            published_seq=self.emitter.published_msg_seq,
            now=turn.now,
            wall_ns=turn.wall_ns,
            term=sync.term,
            peer_timeout_s=self.config.sync.peer_timeout_s,
        )
        turn.out += actions
        if proposed:
            self._send_stream_state(None, turn)  # the backups hear the proposal now, not a heartbeat later

    def on_control(self, request: bytes, *, now: float, wall_ns: int) -> list[Action]:
        """A request on the local control socket (JSON); its reply comes as :class:`ReplyControl`."""
        try:
            command: Command = decode_request(request)
        except ControlError as exc:
            return [ReplyControl({"ok": False, "error": f"bad request: {exc}"})]
        if isinstance(command, Purge):
            self._controls += 1
            command = replace(command, command_id=f"control-{self._controls}")
        reply, actions = self.on_command(command, now=now, wall_ns=wall_ns)
        if reply.get("deferred") and isinstance(command, Purge):
            self._control_waiting = command.command_id  # answered by its CommandDone
            return actions
        return [*actions, ReplyControl(reply)]

    def on_admin(
        self, command: Command | AccessChange | SealChange, *, now: float, wall_ns: int
    ) -> list[Action]:
        """A command from the admin server; a purge's reply goes back as :class:`ReplyAdmin`.

        Access and seal changes become the shell's actions, timed by :class:`AccessDesk`.
        """
        if isinstance(command, AccessChange | SealChange):
            return self.access.on_change(command, now=now)
        reply, actions = self.on_command(command, now=now, wall_ns=wall_ns)
        if isinstance(command, Purge) and not reply.get("deferred"):
            actions.append(ReplyAdmin(command.command_id, reply))
        return actions

    def on_command(
        self, command: Command, *, now: float, wall_ns: int
    ) -> tuple[dict[str, Any], list[Action]]:
        """Carry out an operator command; returns the reply and the actions."""
        turn = self._turn(now, wall_ns)
        self._rejection = None
        if (
            isinstance(command, DropPackets | CorruptState | Penalty | Busy)
            and not self.config.fault_injection
        ):
            return {
                "ok": False,
                "error": "fault injection is off (start the adapter with --allow-fault-injection)",
            }, []
        if isinstance(command, EndSession):
            reply, steps = self.sessions.request_end(self._session_view(), command.reason)
            self._carry(steps, turn)
            return reply, turn.out
        if isinstance(command, Purge):
            reply = self.delayed.on_command(command, self._purge_context(), turn.out)
            self._deferred += bool(reply.get("deferred"))
            return reply, self._replies(turn)
        reply = self._tune(command, turn)
        self._carry(self.gaps.decide(self._gap_view()), turn)
        if self._rejection is not None:
            reply = {"ok": False, "error": self._rejection}
        elif isinstance(command, ShowStatus | RoleCommand):
            reply.update(self.status())
        self.conflated.observe(turn.out)
        return reply, turn.out

    def _tune(self, command: Command, turn: Turn) -> dict[str, Any]:
        # The commands that change how this adapter runs (role, throttle, fault injection).
        reply: dict[str, Any] = {"ok": True}
        if isinstance(command, RoleCommand):
            self.apply(OperatorCommand(command.kind, command.reason, command.force), turn)
        elif isinstance(command, Throttle):
            self._rate_limit = command.rate
            reply["rate"] = command.rate
        elif isinstance(command, DropPackets):
            self.emitter.output.inject_drops(every=command.every, count=command.count)
            reply.update(every=command.every, count=command.count)
        elif isinstance(command, Penalty):
            self.health.penalty = command.value
        elif isinstance(command, CorruptState):
            self.pipeline.corrupt(command.delta)
            reply["digest"] = self.state.digest
        elif isinstance(command, Busy):
            reply.update(self.busy.arm(where=command.where, ms=command.ms, turns=command.turns,
                                       hold_gil=command.gil))  # fmt: skip
        return reply

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
        delayed_from: int | None = None,
    ) -> recovery.RecoverySummary:
        """Rebuild numbering, conversion state and term from the journal (before any other input).

        Args:
            checkpoint: the newest valid checkpoint, if any.
            journal: reads the journal's records.
            journal_last_msg_seq: the last msg_seq in the journal (0: empty).
            term: the highest term this adapter had recorded (``RecordTerm``).
            delayed_from: the first journaled msg_seq not yet due on the delayed line (a restart
                does not send again what was due while it was down); ``None``: from the start.
        """
        controls: list[Any] = []
        summary = recovery.recover_state(journal, checkpoint, self.state, self.sequencer, controls=controls)
        self.pipeline.ledger.base = summary.last_source_seq  # the ledger books from here on
        self.sessions.recovered(summary.session)
        purges = recovery.checkpoint_purges(checkpoint.state) if checkpoint is not None else []
        self.delayed.restore(purges + recovery.journal_purges(controls))
        if delayed_from is not None:
            self.delayed.start_at(delayed_from)
        self.emitter.published_msg_seq = journal_last_msg_seq
        self._sync = self._sync.evolve(published=journal_last_msg_seq, term=max(self._sync.term, term))
        if self.emitter.journal is not None:
            self.emitter.journal.resume(
                last_msg_seq=journal_last_msg_seq,
                last_source_seq=summary.last_source_seq,
                session=summary.session.id,
            )
        return summary

    def on_rebind_wanted(self, where: frozenset[str], *, now: float) -> None:
        """A revoked key was connected to ``where`` (sockets that cannot cut off one peer): rebind in time."""
        self.access.on_rebind_wanted(where, now=now)

    def on_delayed_records(self, records: Iterable[RecordLike], *, caught_up: bool) -> None:
        """Journal records the shell read for the delayed line (see :meth:`delayed_wants`)."""
        self.delayed.feed(records, caught_up=caught_up)

    # ---- what the runner asks ------------------------------------------------------------

    def next_deadline(self, now: float, *, heartbeat: bool = True) -> float:
        """When :meth:`on_tick` must run next (never later than a tenth of a second).

        ``heartbeat=False``: not counting the active's heartbeat report, which the source
        pump sends while it runs (:meth:`pump_report`).
        """
        if self._woke:
            return now  # the timers skipped on waking are due: at once, once the sync bus is read
        sync_deadline = next_deadline(self.sync, self.config.sync, now=now, heartbeat=heartbeat)
        deadline = min(sync_deadline, now + TICK_AT_LEAST_EVERY_S)
        deadline = min(deadline, self.access.next_deadline())
        if self.sync.is_publishing and self.emitter.may_heartbeat(self.sequencer.last_recorded_source_seq):
            # Only a heartbeat that may go out is a deadline: one that waits for the gate waits
            # for a report (a socket event), or an overdue one would spin the loop.
            deadline = min(deadline, self.emitter.output.heartbeat_due())
        if not self.sync.deciding and now < self._paused_until:
            deadline = min(deadline, self._paused_until)
        if now < self._next_read and self._batches_source():
            deadline = min(deadline, self._next_read)  # the source is read again then
        silent = self._silent_release_at()
        if silent is not None:
            deadline = min(deadline, silent)  # what the gate holds goes out then if nobody reported
        gap = self.gaps.deadline()
        if gap is not None:
            deadline = min(deadline, gap)
        delayed = self.delayed.deadline(now=now, wall_ns=self._wall_ns + round((now - self._now) * 1e9))
        if delayed is not None:
            deadline = min(deadline, delayed)
        conflated = self.conflated.deadline(active=self.sync.role is Role.ACTIVE)
        if conflated is not None:
            deadline = min(deadline, conflated)
        return max(now, deadline)

    def delayed_wants(self, *, wall_ns: int) -> int | None:
        """The msg_seq the shell's journal tailer should read from now (``None``: read nothing now)."""
        line = self.delayed.line
        if line is None or not line.wants(wall_ns=wall_ns):
            return None
        return line.read_from()

    def reads_source(self, now: float) -> bool:
        """Whether source frames should be read now (not while deciding, throttled, at a fence, or
        while a backup whose output waits gathers frames: :meth:`on_source_drained`)."""
        if self.sync.deciding or now < self._paused_until or self.pipeline.deferred:
            return False
        return now >= self._next_read or not self._batches_source()

    def _batches_source(self) -> bool:
        # A backup whose new output would wait at the gate: nobody sees it before the active's report.
        return self._sync.role is Role.BACKUP and not self.emitter.gate.passes

    def source_batch(self) -> float:
        """How long the source is left alone after each drain, in seconds (0.0: every frame is read as
        it comes; a backup whose output waits at its gate reads in batches, :meth:`on_source_drained`)."""
        return BACKUP_READ_INTERVAL_S if self._batches_source() else 0.0

    def reads_control(self) -> bool:
        """Whether the control socket is read now (not while its last request's reply is deferred)."""
        return not self._control_waiting

    def sync_view(self) -> SyncView:
        """Role, sync status, term, position, health and lag, for the registry.

        The lag is the health meter's (:attr:`HealthMeter.lag`: a lag that lasted), as of its last
        sample; it is BEHIND past the tolerance a backup may run ahead by.
        """
        sync = self.sync
        lag = self.health.lag if sync.role is Role.BACKUP else 0
        behind = sync.status is SyncStatus.IN_SYNC and lag > self.config.sync.ahead_tolerance
        return SyncView(
            sync.role, sync.status, behind, sync.term, self.sequencer.next_msg_seq, sync.health_score, lag
        )

    def view(self) -> CoreView:
        """What other threads may read (the replay service, metrics): immutable, rebuilt when it changed."""
        book = self.delayed.desk.book
        view = self._view
        if view is None or view.term != self.sync.term or view.purges_version != book.version:
            view = self._view = CoreView(
                term=self.sync.term, purges=book.table(), purges_version=book.version
            )
        return view

    def status(self) -> dict[str, Any]:
        """Role, term, position and counters, for status replies and the final report."""
        return core_status(self)

    # ---- the sync rules --------------------------------------------------------------------

    @property
    def sync(self) -> SyncState:
        """The sync rules' state of this adapter."""
        return self._sync

    def force_role(self, role: Role, *, now: float, wall_ns: int = 0) -> list[Action]:
        """Take ``role`` without an election (tests and benchmarks: an adapter alone, at once)."""
        turn = self._turn(now, wall_ns)
        old = self._sync
        self._sync = old.evolve(
            deciding=False, role=role, active=self.config.adapter if role is Role.ACTIVE else None
        )
        if old.role is not role:
            self._follow_role(old.role, role, turn)
        self.conflated.observe(turn.out)
        return turn.out

    @property
    def is_publishing(self) -> bool:
        return self._sync.is_publishing

    def apply(self, event: SyncEvent, turn: Turn) -> None:
        """Feed one event to the sync rules and carry out what follows from it."""
        if type(event) is SnapshotAdopted:
            self._carry(self.gaps.covered(event.source_seq), turn)
        old = self._sync
        self._sync, actions = on_event(old, event, now=turn.now, config=self.config.sync)
        new = self._sync
        if old.role is not new.role:
            self._follow_role(old.role, new.role, turn)
        if new.term > old.term:
            turn.out.append(RecordTerm(new.term))  # a restart must never go back to a lower term
        if old.is_publishing and not new.is_publishing:
            self.emitter.unpublish()  # failed: nothing unconfirmed goes out any more
        for action in actions:
            _SYNC_ACTIONS[type(action)](self, action, turn)

    def _follow_role(self, old: Role, new: Role, turn: Turn) -> None:
        # The gate and the session follow the role: promoted, our numbering is the channel's;
        # demoted, what we numbered as the active goes out as it was and what follows waits.
        if new is Role.ACTIVE:
            turn.out += self.emitter.open()
            self.gaps.forget()
        elif old is Role.ACTIVE:
            turn.out += self.pipeline.seal(self._sync.term, turn)
            self.emitter.close(confirmed=self.sequencer.last_recorded_source_seq, trusted=True)
        self._carry(self.sessions.on_role_changed(old, new, now=turn.now), turn)
        self.conflated.on_role_changed(old, new)

    def _on_report(self, msg: syncbus.StreamState, turn: Turn) -> None:
        # Our active's report: the session first (a committed boundary changes what the report
        # means), then the position compared with ours -- the only word on what may go out.
        self._follow_budget(msg.table_budget, turn)
        if self.sync.role is Role.FAILED:
            return  # it could not hold the active's tables
        self._carry(self.sessions.on_report(self._session_view(), msg), turn)
        if not msg.last_source_seq:
            return
        at = self._active_position = msg.last_source_seq
        verdict, ahead_by = self.sequencer.compare(PositionReport(at, msg.last_msg_seq, msg.digest))
        self._carry(self.gaps.on_report(at=at, verdict=verdict), turn)
        self.emitter.gate.heard()
        if verdict is ReportVerdict.MATCH:
            turn.out += self.emitter.confirm(at)
        elif verdict in (ReportVerdict.NUMBERING_MISMATCH, ReportVerdict.DIGEST_MISMATCH):
            self.emitter.unpublish()
        self.apply(ActiveReported(msg.sender.adapter, msg.sender.term, verdict, ahead_by), turn)

    def _follow_budget(self, announced: int, turn: Turn) -> None:
        # The group refuses (memory_limit) what its active refuses: a backup runs with the
        # active's tables' budget when its own holds it; one that cannot fails itself, saying so.
        own, current = self.config.table_budget, self.state.table_budget
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
        self.state.table_budget = budget

    def _wants_snapshot(self) -> bool:
        # The active's snapshots go to every backup on the bus. One that did not ask and
        # is in sync has the same state already: adopting it would only discard what waits
        # at its gate (a hole in its line and journal each time another backup joins).
        sync = self.sync
        return (
            sync.snapshot_requested_at is not None
            or (sync.role is not Role.ACTIVE and sync.status is not SyncStatus.IN_SYNC)
            or self.emitter.suspect_after is not None
        )

    def _adopt_now(self, msg: syncbus.Snapshot, turn: Turn) -> None:
        if self.pipeline.on_snapshot(msg):
            self.sessions.on_adopted(msg)
            self.apply(SnapshotAdopted(msg.source_seq), turn)

    def _release_if_active_silent(self, turn: Turn) -> None:
        # The active stopped reporting (dead or stalled): keep the stream flowing on our
        # line while the group elects, as an in-sync backup always did.
        at = self._silent_release_at()
        if at is not None and turn.now >= at:
            turn.out += self.emitter.release(provisional=True)

    def _silent_release_at(self) -> float | None:
        # When what our gate holds goes out if the active stays silent until then (None: it
        # never does now). A deadline of the core's: a backup's source pump holds its
        # batches until the next report or deadline, and the release must not wait for a
        # tick. A provisional release makes the gate pass, so this deadline passes with it.
        sync, gate = self.sync, self.emitter.gate
        if sync.role is not Role.BACKUP or not sync.is_in_sync:
            return None  # not confirmed, or a gap of ours is not settled: nothing goes out unasked
        if gate.passes or not gate.is_trusted:
            return None
        if self.sequencer.has_pending:
            # Behind a report of the active: what we hold covers positions its line carried
            # already, and only that report can say whether we numbered them as it did (it may
            # have numbered past source messages it missed while we were silent). It is checked
            # when we reach it: a match confirms, a mismatch discards.
            return None
        heard = max(sync.reported_at or 0.0, sync.active_heard_at or 0.0, sync.demoted_at or 0.0)
        return heard + self.config.silence_release_s

    def _line_heartbeat(self, turn: Turn) -> None:
        output = self.emitter.output
        if not self.sync.is_publishing or turn.now < output.heartbeat_due():
            return
        if self.emitter.may_heartbeat(self.sequencer.last_recorded_source_seq):
            next_msg_seq = self.sequencer.next_msg_seq
            packet = output.heartbeat(
                term=self.sync.term, next_msg_seq=next_msg_seq, now=turn.now, send_time_ns=turn.wall_ns
            )
            turn.out.append(Publish(packet))

    # ---- the pipeline's interrupts and the parts' steps -----------------------------------

    def _standing(self) -> Standing:
        sync = self._sync
        return Standing(sync.is_publishing, sync.role is Role.BACKUP, sync.term)

    def _drive(self, conversion: Conversion, turn: Turn) -> int:
        """Run a conversion to its end, answering its interrupts; returns how many got a msg_seq."""
        try:
            interrupt = next(conversion)
            while True:
                interrupt = conversion.send(self._on_interrupt(interrupt, turn))
        except StopIteration as done:
            return int(done.value)

    def _on_interrupt(self, interrupt: Interrupt, turn: Turn) -> Reply:
        if type(interrupt) is GapFound:
            hold, steps = self.gaps.on_gap(self._gap_view(), interrupt.gap, jump=interrupt.jump)
            self._carry(steps, turn)
            return Reply(self._standing(), hold)
        if type(interrupt) is Arrived:
            check = interrupt.check
            self._carry(self.gaps.on_arrival(at=interrupt.at, renumbered=check.renumbered), turn)
            self.apply(ArrivalChecked(check.renumbered, check.digest_matches), turn)
        elif type(interrupt) is Adopted:
            self.sessions.on_adopted(interrupt.snapshot)
            self.apply(SnapshotAdopted(interrupt.snapshot.source_seq), turn)
        elif type(interrupt) is Rolled:
            self._carry(self.sessions.on_rolled(interrupt.boundary, interrupt.msg_seq), turn)
        return Reply(self._standing())

    def _carry(self, steps: list[Step], turn: Turn) -> None:
        """Carry out the steps a part of the core returned, in order."""
        for step in steps:
            if isinstance(step, Emit):
                turn.out.append(step.action)
            elif isinstance(step, Apply):
                self.apply(step.event, turn)
            elif isinstance(step, ReportNow):
                if self.sync.role is Role.ACTIVE:
                    self._send_stream_state(None, turn)
            elif isinstance(step, Unpublish):
                self.emitter.unpublish()
            elif isinstance(step, Distrust):
                self.emitter.distrust(step.after)
            else:
                self._drive(self._waiting(step, turn), turn)

    def _waiting(self, step: HoldAt | Commit | Unfence | Abandon | ReleaseGap, turn: Turn) -> Conversion:
        # The steps that end or move a wait of the pipeline (and convert what waited).
        pipeline, standing = self.pipeline, self._standing()
        if isinstance(step, HoldAt):
            return pipeline.hold_at(step.after, standing, turn)
        if isinstance(step, Commit):
            return pipeline.commit(step.boundary, standing, turn)
        if isinstance(step, Unfence):
            return pipeline.unfence(standing, turn)
        if isinstance(step, Abandon):
            return pipeline.abandon(standing, turn)
        return pipeline.release_gap(standing, turn)

    def _session_view(self) -> SessionView:
        pipeline = self.pipeline
        return SessionView(
            sync=self.sync,
            now=self._now,
            wall_ns=self._wall_ns,
            position=self.sequencer.last_source_seq,
            at_fence=pipeline.at_fence(),
            rolling=pipeline.pending_roll is not None,
            checking=pipeline.is_checking_jump or pipeline.holding_gap is not None,
            sender=self._sender(),
        )

    def _gap_view(self) -> GapView:
        sync = self.sync
        return GapView(
            sync=sync,
            now=self._now,
            position=self.sequencer.last_source_seq,
            trusted=sync.is_in_sync and self.emitter.suspect_after is None,
            recorded=self.sequencer.recorded_within,
            sender=self._sender(),
        )

    def _purge_context(self) -> PurgeContext:
        journal = self.emitter.journal
        last = None if journal is None else journal.last_msg_seq
        return self.delayed.context(
            self.sync, self._sender(), now=self._now, wall_ns=self._wall_ns, journal_last=last
        )

    def _sender(self, role: Role | None = None) -> syncbus.Sender:
        sync = self.sync
        return syncbus.Sender(
            self.config.adapter, sync.term, sync.role if role is None else role, self._wall_ns
        )

    # ---- the sync rules' actions ----------------------------------------------------------

    def _send_stream_state(self, action: SyncAction | None, turn: Turn) -> None:
        turn.out.append(SendSync(self._stream_state()))

    def _stream_state(self) -> syncbus.StreamState:
        # This adapter's stream state as it reports it (the active's heartbeat).
        seq = self.sequencer
        proposed, committed_k = self.conflated.report_fields() if self._sync.role is Role.ACTIVE else ((), 0)
        return syncbus.StreamState(
            self._sender(),
            self.config.source_stream_number,
            seq.next_msg_seq,
            seq.next_source_seq,
            seq.last_recorded_source_seq,
            seq.last_msg_seq,
            seq.last_digest,
            **self.sessions.report_fields(),
            purge_seq=self.delayed.desk.book.highest_id,
            conflate_proposed=proposed,
            conflate_committed_k=committed_k,
            table_budget=self.state.table_budget if self.config.table_budget else 0,
        )

    def _send_health(self, action: SyncAction, turn: Turn) -> None:
        counters, now = self.pipeline.counters, turn.now
        timeout = self.config.sync.peer_timeout_s
        fresh = [rate for rate, heard in self._peer_rates.values() if now - heard <= timeout]
        sample = self.health.measure(
            now=now,
            numbered=counters.numbered,
            errors=counters.errors,
            lag=self._lag_now(),
            group_rate=max(fresh, default=0.0),
            peer_lags=[lag for lag, heard in self._peer_lags.values() if now - heard <= timeout],
        )
        self.apply(HealthMeasured(health_score(sample), self.emitter.published_msg_seq), turn)
        sync, line = self.sync, self.delayed.line
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
            self.emitter.published_msg_seq,
            self.delayed.desk.book.known_through,
            0 if line is None else line.published_seq,
        )
        turn.out.append(SendSync(message))

    def _lag_now(self) -> int:
        # Source messages behind the active's last report, at this moment (a backup; else 0).
        if self.sync.role is not Role.BACKUP:
            return 0
        return max(0, self._active_position - self.sequencer.last_source_seq)

    def _request_snapshot(self, action: SyncAction, turn: Turn) -> None:
        assert isinstance(action, RequestSnapshot)
        turn.out.append(SendSync(syncbus.SnapshotRequest(self._sender(), action.target)))

    def _send_snapshot(self, action: SyncAction, turn: Turn) -> None:
        seq = self.sequencer
        at, stream = seq.last_recorded_source_seq, self.config.source_stream_number
        symbols, session = self.state.snapshot(), self.sessions.snapshot_fields()
        message = syncbus.Snapshot(self._sender(), stream, at, seq.next_msg_seq, symbols, **session)
        turn.out.append(SendSync(message))
        self.snapshots_sent += 1

    def _role_changed(self, action: SyncAction, turn: Turn) -> None:
        assert isinstance(action, RoleChanged)
        next_msg_seq = self.sequencer.next_msg_seq
        old, new = action.old.value, action.new.value
        logger.info(
            "adapter %d: %s -> %s, term %d, next msg_seq %d (%s)",
            *(self.config.adapter, old, new, action.term, next_msg_seq, action.reason),
        )
        turn.out += self.pipeline.seal(self._sync.term, turn)
        fields = {"old": old, "new": new, "term": action.term, "reason": action.reason}
        if action.new is Role.ACTIVE:
            fields["unpublished"] = self._unpublished_at_promotion()
        turn.out.append(Status("role", {**fields, "next_msg_seq": next_msg_seq}))

    def _unpublished_at_promotion(self) -> int:
        # Everything numbered went out when the gate opened: the new active goes on from the
        # first msg_seq it has not published. A hole here means output was discarded before
        # the promotion (a forced one): reported, and the journals fill it.
        published = self.emitter.published_msg_seq
        unpublished = self.sequencer.last_msg_seq - published
        if unpublished > 0 and published:
            self.unpublished_at_promotion += unpublished
            logger.warning(
                "adapter %d: promoted with %d numbered messages it had not published (msg_seq %d..%d)",
                *(self.config.adapter, unpublished, published + 1, self.sequencer.last_msg_seq),
            )
        return max(0, unpublished)

    def _send_handover(self, action: SyncAction, turn: Turn) -> None:
        assert isinstance(action, SendHandover)
        # Sent as the active's last word, so a backup that hears it still follows us
        # (a backup's word from its active would make it elect at once).
        turn.out.append(SendSync(syncbus.Handover(self._sender(Role.ACTIVE), action.target, action.reason)))

    def _send_failed(self, action: SyncAction, turn: Turn) -> None:
        assert isinstance(action, SendFailed)
        turn.out.append(SendSync(syncbus.Failed(self._sender(), action.reason)))

    def _command_rejected(self, action: SyncAction, turn: Turn) -> None:
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

    def _fault(self, where: str, turn: Turn) -> None:
        # One fault is contained; a fault that keeps coming back means this
        # adapter cannot be trusted: it goes off line once (and stays up, so
        # nothing restarts it into the same fault again and again).
        self._faults.append(turn.now)
        repeated = len(self._faults) == FAULT_LIMIT and turn.now - self._faults[0] <= FAULT_WINDOW_S
        if repeated and self.sync.role is not Role.FAILED:
            reason = f"{FAULT_LIMIT} internal faults in {FAULT_WINDOW_S:g}s (the last {where})"
            self.apply(OperatorCommand(CommandKind.FAIL, reason), turn)

    def _turn(self, now: float, wall_ns: int) -> Turn:
        self._woke = now - self._now > WOKE_AFTER_S
        self._now, self._wall_ns = now, wall_ns
        return Turn(now, wall_ns)

    def _replies(self, turn: Turn) -> list[Action]:
        # A deferred command's reply (CommandDone, from the purge desk) goes back where the
        # command came from: the control socket's waiting request, or the admin server.
        if not self._deferred:
            return turn.out
        out: list[Action] = []
        for action in turn.out:
            if type(action) is not CommandDone:
                out.append(action)
                continue
            self._deferred = max(0, self._deferred - 1)
            if action.command_id == self._control_waiting:
                self._control_waiting = ""
                out.append(ReplyControl(action.reply))
            else:
                out.append(ReplyAdmin(action.command_id, action.reply))
        return out


_SYNC_ACTIONS: Final[Mapping[type, Callable[[AdapterCore, SyncAction, Turn], None]]] = {
    SendStreamState: AdapterCore._send_stream_state,
    SendHealth: AdapterCore._send_health,
    RequestSnapshot: AdapterCore._request_snapshot,
    SendSnapshot: AdapterCore._send_snapshot,
    RoleChanged: AdapterCore._role_changed,
    SendFailed: AdapterCore._send_failed,
    CommandRejected: AdapterCore._command_rejected,
    SendHandover: AdapterCore._send_handover,
}


def _peer_heard(msg: syncbus.SyncMessage) -> PeerHeard:
    sender = msg.sender
    if isinstance(msg, syncbus.Health):
        return PeerHeard(
            sender.adapter, sender.role, sender.term, msg.score, msg.in_sync, msg.published_msg_seq
        )
    return PeerHeard(sender.adapter, sender.role, sender.term)
