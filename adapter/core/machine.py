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
(actions, interrupts, :mod:`~adapter.core.steps`) is carried out in order
into the input's one list of actions (a :class:`~adapter.core.pipeline.Turn`)
by the :class:`~adapter.core.driver.Driver`, which owns the sync rules' state.
Commands go to the :class:`~adapter.core.command_desk.CommandDesk`; the
source to the :class:`~adapter.core.source_side.SourceSide`; the peers'
figures and the machine's samples to the :class:`~adapter.core.health_side.HealthSide`;
the data plane's access and sealing to the :class:`~adapter.core.access_desk.AccessDesk`
(:class:`~adapter.core.parts.CoreParts` holds the parts). No part holds a
pointer to the core. The runner asks :meth:`AdapterCore.next_deadline` when
to call ``on_tick`` again, :meth:`AdapterCore.reads_source` and
:meth:`AdapterCore.reads_control` whether to read those sockets now, and
:meth:`AdapterCore.view` for the immutable :class:`CoreView` other threads read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from feedha.adapter.conversion.engine import ConversionEngine
from feedha.adapter.core import line_timers, pumping, recovery, syncbus
from feedha.adapter.core.access_desk import AccessChange, SealChange
from feedha.adapter.core.actions import Action
from feedha.adapter.core.command_desk import CommandDesk
from feedha.adapter.core.commands import Command
from feedha.adapter.core.config import CoreConfig
from feedha.adapter.core.driver import TICK_AT_LEAST_EVERY_S, Driver
from feedha.adapter.core.health import MachineSample
from feedha.adapter.core.health_side import HealthSide
from feedha.adapter.core.parts import build_parts
from feedha.adapter.core.pumping import Pumped, PumpMode, PumpPlan, PumpStop
from feedha.adapter.core.records import RecordLike
from feedha.adapter.core.restart import restore_parts
from feedha.adapter.core.source_side import SourceSide
from feedha.adapter.core.sync import (
    HeartbeatSent,
    PeerHeard,
    Role,
    SnapshotRequested,
    SyncState,
    SyncStatus,
    Tick,
    next_deadline,
)
from feedha.adapter.core.turn import Turn
from feedha.adapter.core.views import CoreView, SyncView, core_status

logger = logging.getLogger(__name__)

__all__ = ["AdapterCore", "CoreView", "SyncView"]


class AdapterCore:
    """One feed adapter's decisions.

    Args:
        config: identity, numbering, timers and limits.
        engine: the conversion engine (it owns the conversion state).
        now: the monotonic clock at start-up, in seconds.
    """

    def __init__(self, config: CoreConfig, engine: ConversionEngine, *, now: float) -> None:
        self.config = config
        parts = self.parts = build_parts(config, engine, now=now)
        # The parts, by name (each owns its state; tests and the runner read them).
        self.engine, self.state, self.emitter, self.pipeline = (
            engine,
            parts.state,
            parts.emitter,
            parts.pipeline,
        )
        self.sequencer, self.sessions, self.gaps = parts.sequencer, parts.sessions, parts.gaps
        self.access, self.busy, self.health = parts.access, parts.busy, parts.health
        self.delayed, self.conflated = parts.delayed, parts.conflated
        self.vitals = HealthSide(parts.health, peer_timeout_s=config.sync.peer_timeout_s, now=now)
        self.driver = Driver(parts, self.vitals, now=now)
        self.source = SourceSide(parts, self.driver)
        self.commands = CommandDesk(parts, self.driver, self.source, self.status)
        self.sync_garbage = 0
        self._view: CoreView | None = None

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
        return self.source.on_frame(parts, self.driver.turn(now, wall_ns), frame, start, converted)

    def on_source_drained(self, *, now: float, wall_ns: int) -> list[Action]:
        """The runner read every source frame that was waiting: what is ready goes out now.

        Sealed at once; a backup whose output waits at its gate reads the source again only a
        while later (:meth:`SourceSide.on_drained <adapter.core.source_side.SourceSide.on_drained>`).
        """
        return self.source.on_drained(self.driver.turn(now, wall_ns))

    def on_pumped(self, pumped: Pumped, mode: PumpMode, *, now: float, wall_ns: int) -> list[Action]:
        """The source pump came back from a run in ``mode``: book what it converted, numbered and sealed.

        A source message it stopped at (one it does not take whole) goes on here from where
        it stopped, as :meth:`on_source` takes it, and what is ready then goes out. A run that
        came back having drained the source read all there was (:meth:`on_source_drained`). The
        heartbeat reports it sent (:meth:`pump_report`) count as the sync rules' heartbeats.
        """
        driver = self.driver
        turn = driver.turn(now, wall_ns)
        out, reached = pumping.settle(self, pumped, mode)
        if pumped.reports:  # its heartbeat reports are the sync rules' own: the next is due after the last
            driver.apply(HeartbeatSent(pumped.last_report_ns / 1e9), turn)
        if reached:
            driver.drive(self.pipeline.reached(reached, driver.standing(), turn), turn)
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
            return out + self.pipeline.seal(self.driver.sync.term, turn)
        if pumped.stop in (PumpStop.DEADLINE, PumpStop.DRAINED):
            out += self.on_source_drained(now=now, wall_ns=wall_ns)
        return out

    def on_sync(self, msg: syncbus.SyncMessage, *, now: float, wall_ns: int) -> list[Action]:
        """One message from a peer on the sync bus."""
        driver = self.driver
        turn = driver.turn(now, wall_ns)
        sender = msg.sender
        if sender.adapter == self.config.adapter:
            return turn.out
        driver.apply(_peer_heard(msg), turn)
        if isinstance(msg, syncbus.Health):
            self.vitals.on_peer_health(msg, now=now)
        sync = driver.sync
        from_active = sender.adapter == sync.active and sender.term == sync.term and sync.role is Role.BACKUP
        if isinstance(msg, syncbus.StreamState) and from_active:
            driver.on_report(msg, turn)
        elif isinstance(msg, syncbus.SnapshotRequest):
            driver.apply(SnapshotRequested(sender.adapter, msg.target_adapter), turn)
        elif isinstance(msg, syncbus.Snapshot) and from_active and driver.wants_snapshot():
            driver.adopt_now(msg, turn)
        elif isinstance(msg, syncbus.SessionAck):
            driver.carry(self.sessions.on_ack(driver.session_view(), msg), turn)
        elif isinstance(msg, syncbus.GapQuery | syncbus.GapAnswer | syncbus.Handover):
            driver.carry(self.gaps.on_message(driver.gap_view(), msg, from_active=from_active), turn)
        if isinstance(msg, syncbus.StreamState | syncbus.Purges | syncbus.PurgeAck | syncbus.Health):
            self.delayed.on_sync(msg, driver.purge_context(), turn.out, from_active=from_active)
        driver.carry(self.gaps.decide(driver.gap_view()), turn)
        line_timers.conflate_sync(self.parts, driver.sync, msg, driver.sender(), turn)
        return self.commands.replies(turn)

    def on_sync_garbage(self) -> None:
        """A sync-bus frame that did not decode (counted, nothing else)."""
        self.sync_garbage += 1

    def on_tick(self, *, now: float, wall_ns: int) -> list[Action]:
        """The loop went round: seal the packet being filled and fire whatever timer is due."""
        driver = self.driver
        turn = driver.turn(now, wall_ns)
        sample = self.vitals.sample_due(now)
        if sample is not None:
            turn.out.append(sample)
        turn.out += self.access.on_tick(now=now, wall_ns=wall_ns)
        sync = driver.sync
        turn.out += self.pipeline.seal(sync.term, turn)
        line_timers.checkpoint(self.parts, turn)
        if now >= next_deadline(sync, self.config.sync, now=now) and not driver.woke:
            driver.apply(Tick(behind_report=self.sequencer.has_pending), turn)
        self._timers(turn)
        if self.busy.wants("tick"):
            return self.busy.place(self.commands.replies(turn))  # a long timer turn (fault injection)
        return self.commands.replies(turn)

    def _timers(self, turn: Turn) -> None:
        # The parts' timers. Views are built only for a part with work to do: this runs on every
        # turn of the loop.
        driver, parts, now, wall_ns = self.driver, self.parts, turn.now, turn.wall_ns
        if self.gaps.query is not None:
            driver.carry(self.gaps.decide(driver.gap_view()), turn)
        if driver.sync.role is Role.ACTIVE and self.sessions.has_work(now=now, wall_ns=wall_ns):
            driver.carry(self.sessions.tick(driver.session_view()), turn)
        line_timers.release_if_active_silent(parts, driver.sync, turn)
        if self.delayed.has_work(driver.sync.role):
            self.delayed.on_tick(driver.purge_context(), turn.out)
        line_timers.line_heartbeat(parts, driver.sync, turn)
        if line_timers.conflate_tick(parts, driver.sync, turn):
            driver.send_stream_state(None, turn)  # the backups hear the proposal now, not a heartbeat later

    def on_control(self, request: bytes, *, now: float, wall_ns: int) -> list[Action]:
        """A request on the local control socket (JSON); its reply comes as ``ReplyControl``."""
        return self.commands.on_control(request, now=now, wall_ns=wall_ns)

    def on_admin(
        self, command: Command | AccessChange | SealChange, *, now: float, wall_ns: int
    ) -> list[Action]:
        """A command from the admin server (:meth:`CommandDesk.on_admin
        <adapter.core.command_desk.CommandDesk.on_admin>`): access, seal changes, purges ..."""
        return self.commands.on_admin(command, now=now, wall_ns=wall_ns)

    def on_command(
        self, command: Command, *, now: float, wall_ns: int
    ) -> tuple[dict[str, Any], list[Action]]:
        """Carry out an operator command; returns the reply and the actions."""
        return self.commands.on_command(command, now=now, wall_ns=wall_ns)

    def on_fault(self, where: str, *, now: float, wall_ns: int) -> list[Action]:
        """The runner caught an unexpected exception in a handler (a bug): count it, fail if it repeats."""
        turn = self.driver.turn(now, wall_ns)
        self.pipeline.counters.internal_errors += 1
        self.driver.fault(where, turn)
        return turn.out

    def on_machine_sample(self, sample: MachineSample) -> None:
        """The latest memory and CPU figures of this process's machine."""
        self.vitals.on_machine_sample(sample)

    def on_checkpoint_cost(self, seconds: float) -> None:
        """The turn that wrote the last checkpoint took ``seconds`` (the next waits ten times that)."""
        journal = self.emitter.journal
        if journal is not None:
            journal.note_cost(seconds)

    def on_journal_refused(self, first_msg_seq: int, last_msg_seq: int) -> None:
        """The runner's journal failed to write these numbered messages: they stay off this line.

        The runner raises the error afterwards, and it is booked as a fault (:meth:`on_fault`).
        """
        self.emitter.refuse(first_msg_seq, last_msg_seq)

    def on_access_events(
        self,
        admitted: Iterable[tuple[str, str]],
        blind: Iterable[str],
        lost: bool,
        *,
        now: float,
        wall_ns: int,
    ) -> None:
        """What the ZAP and socket threads saw (:meth:`AccessDesk.on_events
        <adapter.core.access_desk.AccessDesk.on_events>`): keys let in where, blind sockets."""
        self.access.on_events(admitted, blind, lost=lost, now=now, wall_ns=wall_ns)

    def on_delayed_records(self, records: Iterable[RecordLike], *, caught_up: bool) -> None:
        """Journal records the shell read for the delayed line (see :meth:`delayed_wants`)."""
        self.delayed.feed(records, caught_up=caught_up)

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
        summary = restore_parts(
            self.parts,
            checkpoint,
            journal,
            journal_last_msg_seq=journal_last_msg_seq,
            delayed_from=delayed_from,
        )
        self.driver.recovered(published=journal_last_msg_seq, term=term)
        return summary

    # ---- the source pump --------------------------------------------------------------------

    def pump_plan(self, now: float) -> PumpPlan | None:
        """Whether the source pump may run now, and within what (:mod:`adapter.core.pumping`)."""
        return pumping.plan(self, now)

    def pump_report(self) -> pumping.PumpReport | None:
        """The active's heartbeat reports for the source pump to send while it runs (``None``: not now).

        Only an active past its decision whose reports carry nothing but its positions: a
        conflation boundary it proposes goes out from the core's turn (and the pump does not run
        with a conflated line anyway).
        """
        driver = self.driver
        sync = driver.sync
        if sync.role is not Role.ACTIVE or sync.deciding or driver.woke:
            return None
        return driver.reporter.pump_report(sync, driver.sender())

    def keepalive_report(self, now: float, *, snapshot_asked: bool = False) -> syncbus.StreamState | None:
        """The active's report to repeat while one long turn keeps its loop from reporting, or ``None``.

        A turn that writes a checkpoint (due at ``now``), or answers a snapshot request
        (``snapshot_asked``), folds the whole conversion state: with an order table of 100,000
        orders that took 0.66 s of the loop, past the heartbeat timeout, and every backup elected a
        new active. The shell repeats this report meanwhile (:meth:`SyncLink.keepalive
        <adapter.sync_link.SyncLink.keepalive>`): the active's positions do not move during the
        turn, so it says what an idle active says. ``None``: not the active, or no long turn ahead.
        """
        sync = self.driver.sync
        if sync.role is not Role.ACTIVE or sync.deciding:
            return None
        journal = self.emitter.journal
        long_tick = self.busy.wants("tick") or (journal is not None and journal.is_checkpoint_due(now))
        if snapshot_asked or long_tick:
            return self.driver.reporter.stream_state(self.driver.sender())
        return None

    # ---- what the runner asks ------------------------------------------------------------

    def next_deadline(self, now: float, *, heartbeat: bool = True) -> float:
        """When :meth:`on_tick` must run next (never later than a tenth of a second).

        ``heartbeat=False``: not counting the active's heartbeat report, which the source
        pump sends while it runs (:meth:`pump_report`). Asked on every turn of the loop.
        """
        driver = self.driver
        if driver.woke:
            return now  # the timers skipped on waking are due: at once, once the sync bus is read
        sync, emitter, config = driver.sync, self.emitter, self.config
        deadline = min(
            next_deadline(sync, config.sync, now=now, heartbeat=heartbeat), now + TICK_AT_LEAST_EVERY_S
        )
        deadline = min(deadline, self.access.next_deadline())
        if sync.is_publishing and emitter.may_heartbeat(self.sequencer.last_recorded_source_seq):
            # Only a heartbeat that may go out is a deadline: one that waits for the gate waits
            # for a report (a socket event), or an overdue one would spin the loop.
            deadline = min(deadline, emitter.output.heartbeat_due())
        deadline = self.source.deadline(now, deadline)
        silent = line_timers.silent_release_at(self.parts, sync)
        if silent is not None:
            deadline = min(deadline, silent)  # what the gate holds goes out then if nobody reported
        gap = self.gaps.deadline()
        if gap is not None:
            deadline = min(deadline, gap)
        delayed = self.delayed.deadline(now=now, wall_ns=driver.wall_ns + round((now - driver.now) * 1e9))
        if delayed is not None:
            deadline = min(deadline, delayed)
        conflated = self.conflated.deadline(active=sync.role is Role.ACTIVE)
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
        """Whether source frames should be read now (not while deciding, paused, at a fence, or while a
        backup whose output waits gathers frames: :meth:`on_source_drained`)."""
        return self.source.reads(now)

    def source_batch(self) -> float:
        """How long the source is left alone after each drain, in seconds (0.0: every frame is read as
        it comes; a backup whose output waits at its gate reads in batches, :meth:`on_source_drained`)."""
        return self.source.batch()

    def is_throttled(self) -> bool:
        """Whether the source is read at a reduced rate (rule 3's throttle, or an operator's)."""
        return self.source.is_throttled()

    def reads_control(self) -> bool:
        """Whether the control socket is read now (not while its last request's reply is deferred)."""
        return self.commands.reads_control()

    def sync_view(self) -> SyncView:
        """Role, sync status, term, position, health and lag, for the registry.

        The lag is the health meter's (:attr:`HealthMeter.lag`: a lag that lasted), as of its last
        sample; it is BEHIND past the tolerance a backup may run ahead by.
        """
        sync = self.driver.sync
        lag = self.health.lag if sync.role is Role.BACKUP else 0
        behind = sync.status is SyncStatus.IN_SYNC and lag > self.config.sync.ahead_tolerance
        return SyncView(
            sync.role, sync.status, behind, sync.term, self.sequencer.next_msg_seq, sync.health_score, lag
        )

    def view(self) -> CoreView:
        """What other threads may read (the replay service, metrics): immutable, rebuilt when it changed."""
        book, term = self.delayed.desk.book, self.driver.sync.term
        view = self._view
        if view is None or view.term != term or view.purges_version != book.version:
            view = self._view = CoreView(term=term, purges=book.table(), purges_version=book.version)
        return view

    def status(self) -> dict[str, Any]:
        """Role, term, position and counters, for status replies and the final report."""
        return core_status(self.parts, self.driver, sync_garbage=self.sync_garbage)

    # ---- the sync rules --------------------------------------------------------------------

    @property
    def sync(self) -> SyncState:
        """The sync rules' state of this adapter (the driver's; inside the core, ``driver.sync``)."""
        return self.driver.sync

    @property
    def is_publishing(self) -> bool:
        return self.driver.sync.is_publishing

    @property
    def snapshots_sent(self) -> int:
        """Snapshots this adapter sent as the active."""
        return self.driver.snapshots_sent

    @property
    def unpublished_at_promotion(self) -> int:
        """Numbered messages it had not published when it was promoted (a forced promotion's hole)."""
        return self.driver.unpublished_at_promotion

    def force_role(self, role: Role, *, now: float, wall_ns: int = 0) -> list[Action]:
        """Take ``role`` without an election (tests and benchmarks: an adapter alone, at once)."""
        turn = self.driver.turn(now, wall_ns)
        self.driver.force_role(role, turn)
        self.conflated.observe(turn.out)
        return turn.out


def _peer_heard(msg: syncbus.SyncMessage) -> PeerHeard:
    sender = msg.sender
    if isinstance(msg, syncbus.Health):
        return PeerHeard(
            sender.adapter, sender.role, sender.term, msg.score, msg.in_sync, msg.published_msg_seq
        )
    return PeerHeard(sender.adapter, sender.role, sender.term)
