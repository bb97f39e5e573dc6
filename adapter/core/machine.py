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

Source frames go through the conversion engine a *run* at a time
(:mod:`adapter.conversion.engine`); the one message a run stops at goes
through :meth:`AdapterCore._careful` (errors, duplicates, gaps, positions the
sync rules watch, snapshots). Every handler that the sync rules must hear of
becomes an event for :func:`adapter.core.sync.on_event`, whose actions turn
into sync-bus messages and status events here. The runner asks
:meth:`next_deadline` when to call ``on_tick`` again and :meth:`reads_source`
whether to read source frames now (not while deciding the role, not while
throttled).
"""

from __future__ import annotations

import logging
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from adapter.conversion.engine import ConversionEngine, Stop
from adapter.conversion.messages import SourceMessage
from adapter.conversion.parser import peek_source_seq
from adapter.core import recovery, syncbus
from adapter.core.actions import Action, Publish, SendSync, Status
from adapter.core.commands import (
    Command,
    CorruptState,
    DropPackets,
    Penalty,
    RoleCommand,
    ShowStatus,
    Throttle,
)
from adapter.core.config import MAX_PAUSE_S, RING_SIZE, CoreConfig
from adapter.core.health import HealthMeter, MachineSample, health_score
from adapter.core.journaling import JournalPlan
from adapter.core.output import UNBOUNDED_ROOM, LineOutput
from adapter.core.ring import SourceRing
from adapter.core.sequencer import PositionReport, Sequencer, SourceVerdict
from adapter.core.sync import Action as SyncAction
from adapter.core.sync import (
    ActiveReported,
    ArrivalChecked,
    CommandRejected,
    HealthMeasured,
    OperatorCommand,
    PeerHeard,
    RequestSnapshot,
    Role,
    RoleChanged,
    SendFailed,
    SendHealth,
    SendSnapshot,
    SendStreamState,
    SnapshotAdopted,
    SnapshotRequested,
    SourceGapSeen,
    SyncEvent,
    SyncStatus,
    Tick,
    initial_state,
    next_deadline,
    on_event,
)
from adapter.errors import ConversionError
from proto import fix, wire

logger = logging.getLogger(__name__)

__all__ = ["AdapterCore", "CoreCounters", "SyncView"]

UNBOUNDED_COUNT: Final = 1 << 30
TICK_AT_LEAST_EVERY_S: Final = 0.1


@dataclass(slots=True)
class CoreCounters:
    """What the core has counted since start (the status reply shows them)."""

    published: int = 0
    malformed_frames: int = 0
    malformed_messages: int = 0
    conversion_errors: int = 0
    duplicates: int = 0
    source_gaps: int = 0
    sync_garbage: int = 0
    snapshots_sent: int = 0
    snapshots_adopted: int = 0

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


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
        self.engine = engine
        self.state = engine.state
        self.sequencer = Sequencer()
        self.sync = initial_state(
            adapter=config.adapter, want_active=config.want_active, term=config.term, now=now
        )
        self.output = LineOutput(
            channel=config.channel_number,
            adapter=config.adapter,
            max_packet_bytes=config.max_packet_bytes,
            heartbeat_s=config.line_heartbeat_s,
        )
        self.journal = (
            JournalPlan(
                source_stream=config.source_stream_number,
                checkpoint_every=config.checkpoint_every,
                checkpoint_interval_s=config.checkpoint_interval_s,
                now=now,
            )
            if config.journal
            else None
        )
        self.health = HealthMeter(penalty=config.health_penalty, now=now)
        self.counters = CoreCounters()
        self._ring = SourceRing(RING_SIZE)
        self._pending_snapshot: syncbus.Snapshot | None = None
        self._active_position = 0  # the last source_seq the active reported
        self._paused_until = 0.0
        self._rate_limit = 0.0  # operator throttle, messages/s (0: none)
        self._rejection: str | None = None
        self._out: list[Action] = []
        self._now = now
        self._wall_ns = 0

    def __repr__(self) -> str:
        return (
            f"<AdapterCore [adapter={self.config.adapter}, role={self.sync.role.value}, "
            f"status={self.sync.status.value}, term={self.sync.term}, "
            f"next_msg_seq={self.sequencer.next_msg_seq}]>"
        )

    # ---- inputs -----------------------------------------------------------------------

    def on_source(self, parts: list[bytes], *, now: float, wall_ns: int) -> list[Action]:
        """One ZeroMQ message from the source: ``[topic, frame]``; a frame carries FIX messages."""
        self._clock(now, wall_ns)
        if len(parts) != 2:
            self.counters.malformed_frames += 1
            return []
        frame = parts[1]
        converted = self._convert(frame)
        if converted:
            self._ring.add(frame, converted)
            self._throttle(converted)
        return self._take()

    def on_sync(self, msg: syncbus.SyncMessage, *, now: float, wall_ns: int) -> list[Action]:
        """One message from a peer on the sync bus."""
        self._clock(now, wall_ns)
        sender = msg.sender
        if sender.adapter == self.config.adapter:
            return []
        self._apply(_peer_heard(msg))
        sync = self.sync
        from_active = sender.adapter == sync.active and sender.term == sync.term and sync.role is Role.BACKUP
        if isinstance(msg, syncbus.StreamState) and from_active and msg.last_source_seq:
            self._active_position = msg.last_source_seq
            report = PositionReport(msg.last_source_seq, msg.last_msg_seq, msg.digest)
            verdict, ahead_by = self.sequencer.compare(report)
            self._apply(ActiveReported(sender.adapter, sender.term, verdict, ahead_by))
        elif isinstance(msg, syncbus.SnapshotRequest):
            self._apply(SnapshotRequested(sender.adapter, msg.target_adapter))
        elif isinstance(msg, syncbus.Snapshot) and from_active:
            self._on_snapshot(msg)
        return self._take()

    def on_sync_garbage(self) -> None:
        """A sync-bus frame that did not decode (counted, nothing else)."""
        self.counters.sync_garbage += 1

    def on_tick(self, *, now: float, wall_ns: int) -> list[Action]:
        """The loop went round: seal the packet being filled and fire whatever timer is due."""
        self._clock(now, wall_ns)
        self._seal()
        if self.journal is not None:
            checkpoint = self.journal.checkpoint(
                now=now, last_source_seq=self.sequencer.last_source_seq, symbols=self.state.snapshot
            )
            if checkpoint is not None:
                self._out.append(checkpoint)
        if now >= next_deadline(self.sync, self.config.sync, now=now):
            self._apply(Tick())
        if self.sync.is_publishing and now >= self.output.heartbeat_due():
            packet = self.output.heartbeat(
                term=self.sync.term, next_msg_seq=self.sequencer.next_msg_seq, now=now, send_time_ns=wall_ns
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
        if isinstance(command, RoleCommand):
            self._apply(OperatorCommand(command.kind, command.reason))
        elif isinstance(command, Throttle):
            self._rate_limit = command.rate
            reply["rate"] = command.rate
        elif isinstance(command, DropPackets):
            self.output.inject_drops(every=command.every, count=command.count)
            reply.update(every=command.every, count=command.count)
        elif isinstance(command, Penalty):
            self.health.penalty = command.value
        elif isinstance(command, CorruptState):
            self._corrupt(command.delta)
            reply["digest"] = self.state.digest
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
    ) -> recovery.RecoverySummary:
        """Rebuild numbering and conversion state from the journal (before any other input)."""
        summary = recovery.recover_state(journal, checkpoint, self.state, self.sequencer)
        if self.journal is not None:
            self.journal.resume(last_msg_seq=journal_last_msg_seq, last_source_seq=summary.last_source_seq)
        return summary

    # ---- what the runner asks ------------------------------------------------------------

    def next_deadline(self, now: float) -> float:
        """When :meth:`on_tick` must run next (never later than a tenth of a second)."""
        deadline = min(next_deadline(self.sync, self.config.sync, now=now), now + TICK_AT_LEAST_EVERY_S)
        if self.sync.is_publishing:
            deadline = min(deadline, self.output.heartbeat_due())
        if not self.sync.deciding and now < self._paused_until:
            deadline = min(deadline, self._paused_until)
        return max(now, deadline)

    def reads_source(self, now: float) -> bool:
        """Whether source frames should be read now (not while deciding the role or throttled)."""
        return not self.sync.deciding and now >= self._paused_until

    def sync_view(self) -> SyncView:
        """Role, sync status, term, position, health and lag, for the registry."""
        sync = self.sync
        lag = (
            max(0, self._active_position - self.sequencer.last_source_seq) if sync.role is Role.BACKUP else 0
        )
        behind = sync.status is SyncStatus.IN_SYNC and lag > self.config.sync.ahead_tolerance
        return SyncView(
            sync.role, sync.status, behind, sync.term, self.sequencer.next_msg_seq, sync.health_score, lag
        )

    def status(self) -> dict[str, Any]:
        """Role, term, position and counters, for status replies and the final report."""
        sync, output, journal = self.sync, self.output, self.journal
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
            "journal_last_msg_seq": None if journal is None else journal.last_msg_seq,
            **self.counters.as_dict(),
            "packets": output.packets,
            "heartbeats": output.heartbeats,
            "dropped_packets": output.dropped_packets,
            "journaled": 0 if journal is None else journal.journaled,
            "journal_skipped": 0 if journal is None else journal.skipped,
            "checkpoints": 0 if journal is None else journal.checkpoints,
        }

    # ---- the source path ---------------------------------------------------------------

    def stop_position(self) -> int:
        """The lowest source position the sync rules watch (0: none); runs stop before it.

        A pending report of the active (rule 2 renumbers there, and the digest
        is checked) and a pending snapshot (adopted exactly there) need the
        careful path; everything else may go through the engine's runs.
        """
        watched = self.sequencer.first_pending()
        pending = self._pending_snapshot
        if pending is not None:
            watched = pending.source_seq if not watched else min(watched, pending.source_seq)
        return watched

    def _convert(self, frame: bytes) -> int:
        engine, sequencer, output = self.engine, self.sequencer, self.output
        journaling = self.journal is not None
        pos = converted = 0
        while pos < len(frame):
            publishing = self.sync.is_publishing
            room, max_count = output.room() if publishing else (UNBOUNDED_ROOM, UNBOUNDED_COUNT)
            last = sequencer.last_source_seq
            run = engine.run(
                frame,
                pos,
                expect_seq=last + 1 if last else 0,
                stop_seq=self.stop_position(),
                room=room,
                max_count=max_count,
                publish_time_ns=self._wall_ns,
                source_stream=self.config.source_stream_number,
                # Encoded whether or not this adapter publishes: a message too big to
                # publish must be skipped by every adapter of the group alike.
                publish=True,
                want_payloads=publishing and journaling,
            )
            if run.count:
                converted += run.count
                first_msg_seq = sequencer.next_msg_seq
                sequencer.record_run(run.first_source_seq, first_msg_seq, run.digests)
                if publishing:
                    output.add_blocks(first_msg_seq, run.count, run.blocks)
                    self.counters.published += run.count
                    if run.payloads is not None:
                        seqs = array("q", range(run.first_source_seq, run.first_source_seq + run.count))
                        self._journal(first_msg_seq, seqs, run.payloads)
            pos = run.pos
            if run.stop is Stop.SLOW:
                body, pos = fix.next_message(frame, pos)
                if body is None:
                    self.counters.malformed_messages += 1
                else:
                    converted += self._careful(body)
            elif run.stop is not Stop.END:
                self._seal()  # the packet is full
        return converted

    def _careful(self, body: bytes) -> int:
        """Take one message through the careful path; 1 if it got a msg_seq."""
        try:
            msg = self.engine.parse(body)
        except ConversionError as exc:
            self._unconvertible(body, exc)
            return 0
        sequencer = self.sequencer
        verdict = sequencer.check_source(msg.source_seq)
        if verdict is SourceVerdict.DUPLICATE:
            self.counters.duplicates += 1
            return 0
        if verdict is SourceVerdict.GAP:
            self.counters.source_gaps += 1
            self._apply(SourceGapSeen(msg.source_seq - sequencer.next_source_seq))
        pending = self._pending_snapshot
        adopt = pending if pending is not None and pending.source_seq == msg.source_seq else None
        try:
            values = self.state.preview(msg)
            if adopt is not None:
                values = adopt.symbols.get(msg.symbol, values)
            payload = self.engine.encode(msg, values, self._wall_ns)
            if len(payload) > wire.MAX_PAYLOAD:
                raise ConversionError(
                    "oversize", f"payload of {len(payload)} bytes exceeds {wire.MAX_PAYLOAD}"
                )
        except ConversionError as exc:
            self._unconvertible(body, exc, source_seq=msg.source_seq)
            return 0
        if adopt is not None:
            self._pending_snapshot = None
            self.state.restore(adopt.symbols)
            self.counters.snapshots_adopted += 1
            self._apply(SnapshotAdopted(msg.source_seq))
        else:
            self.state.set_symbol(msg.symbol, values)
        self._number(msg, payload)
        return 1

    def _number(self, msg: SourceMessage, payload: bytes) -> None:
        sequencer = self.sequencer
        msg_seq = sequencer.assign(msg.source_seq)
        check = sequencer.record(msg.source_seq, msg_seq, self.state.digest)
        if self.sync.is_publishing:
            if not self.output.fits(len(payload)):
                self._seal()
            self.output.add(msg_seq, self.config.source_stream_number, msg.source_seq, payload)
            self.counters.published += 1
            if self.journal is not None:
                self._journal(msg_seq, (msg.source_seq,), (payload,))
        if check is not None and self.sync.role is Role.BACKUP:
            self._apply(ArrivalChecked(check.renumbered, check.digest_matches))

    def _unconvertible(self, body: bytes, exc: ConversionError, *, source_seq: int | None = None) -> None:
        self.counters.conversion_errors += 1
        if source_seq is None:
            try:
                source_seq = peek_source_seq(body)
            except ConversionError:
                return  # not even sequenced: nothing to account for
        logger.debug("source_seq %d skipped: %s", source_seq, exc)
        if self.sequencer.check_source(source_seq) is SourceVerdict.NEXT:
            # Every adapter skips the same bytes the same way, so numbering stays aligned.
            self.sequencer.skip_source(source_seq)

    def _journal(self, first_msg_seq: int, source_seqs: Any, payloads: Any) -> None:
        assert self.journal is not None
        records = self.journal.records(first_msg_seq, self._wall_ns, source_seqs, payloads)
        if records is not None:
            self._out.append(records)

    def _seal(self) -> None:
        packet = self.output.seal(term=self.sync.term, now=self._now, send_time_ns=self._wall_ns)
        if packet is not None:
            self._out.append(Publish(packet))

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

    # ---- snapshots and fault injection ------------------------------------------------------

    def _on_snapshot(self, msg: syncbus.Snapshot) -> None:
        at, last = msg.source_seq, self.sequencer.last_source_seq
        if last < at:
            self._pending_snapshot = msg  # adopted when we reach ``at`` (see _careful)
            return
        replay = self._ring.messages(
            self.engine.parse, after=at, upto=last, wanted=self.sequencer.is_recorded
        )
        if replay and replay[0].source_seq != at + 1 and last > at:
            logger.info("snapshot at %d is older than our replay ring; waiting for a newer one", at)
            return
        self.state.restore(msg.symbols)
        digests = {at: self.state.digest}
        for replayed in replay:
            try:
                self.state.apply(replayed)
            except ConversionError:
                continue
            digests[replayed.source_seq] = self.state.digest
        self.sequencer.restate_digests(digests)
        self.counters.snapshots_adopted += 1
        self._apply(SnapshotAdopted(at))

    def _corrupt(self, delta: int) -> None:
        for symbol, values in self.state.snapshot().items():
            values.volume += delta
            self.state.set_symbol(symbol, values)
        self.sequencer.restate_digests({self.sequencer.last_recorded_source_seq: self.state.digest})

    # ---- the sync rules ------------------------------------------------------------------

    def _apply(self, event: SyncEvent) -> None:
        was_publishing = self.sync.is_publishing
        self.sync, actions = on_event(self.sync, event, now=self._now, config=self.config.sync)
        if was_publishing and not self.sync.is_publishing:
            self.output.discard()  # held output is dropped (the journal has it)
        for action in actions:
            _SYNC_ACTIONS[type(action)](self, action)

    def _sender(self) -> syncbus.Sender:
        return syncbus.Sender(self.config.adapter, self.sync.term, self.sync.role, self._wall_ns)

    def _send_stream_state(self, action: SyncAction) -> None:
        seq = self.sequencer
        message = syncbus.StreamState(
            self._sender(),
            self.config.source_stream_number,
            seq.next_msg_seq,
            seq.next_source_seq,
            seq.last_recorded_source_seq,
            seq.last_msg_seq,
            seq.last_digest,
        )
        self._out.append(SendSync(message))

    def _send_health(self, action: SyncAction) -> None:
        counters = self.counters
        sample = self.health.measure(
            now=self._now,
            published=counters.published,
            errors=counters.malformed_messages + counters.conversion_errors + counters.malformed_frames,
            lag=self.sync_view().lag,
        )
        self._apply(HealthMeasured(health_score(sample)))
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
        )
        self._out.append(SendSync(message))

    def _request_snapshot(self, action: SyncAction) -> None:
        assert isinstance(action, RequestSnapshot)
        self._out.append(SendSync(syncbus.SnapshotRequest(self._sender(), action.target)))

    def _send_snapshot(self, action: SyncAction) -> None:
        seq = self.sequencer
        message = syncbus.Snapshot(
            self._sender(),
            self.config.source_stream_number,
            seq.last_recorded_source_seq,
            seq.next_msg_seq,
            self.state.snapshot(),
        )
        self._out.append(SendSync(message))
        self.counters.snapshots_sent += 1

    def _role_changed(self, action: SyncAction) -> None:
        assert isinstance(action, RoleChanged)
        next_msg_seq = self.sequencer.next_msg_seq
        logger.info(
            "adapter %d: %s -> %s, term %d, next msg_seq %d (%s)",
            self.config.adapter,
            action.old.value,
            action.new.value,
            action.term,
            next_msg_seq,
            action.reason,
        )
        self._seal()
        fields_ = {
            "old": action.old.value,
            "new": action.new.value,
            "term": action.term,
            "reason": action.reason,
        }
        self._out.append(Status("role", {**fields_, "next_msg_seq": next_msg_seq}))

    def _send_failed(self, action: SyncAction) -> None:
        assert isinstance(action, SendFailed)
        self._out.append(SendSync(syncbus.Failed(self._sender(), action.reason)))

    def _command_rejected(self, action: SyncAction) -> None:
        assert isinstance(action, CommandRejected)
        logger.warning("command %s rejected: %s", action.kind.value, action.reason)
        self._rejection = f"{action.kind.value} rejected: {action.reason}"

    # ---- plumbing ---------------------------------------------------------------------

    def _clock(self, now: float, wall_ns: int) -> None:
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
    CommandRejected: AdapterCore._command_rejected,
}


def _peer_heard(msg: syncbus.SyncMessage) -> PeerHeard:
    sender = msg.sender
    if isinstance(msg, syncbus.Health):
        return PeerHeard(sender.adapter, sender.role, sender.term, msg.score, msg.in_sync)
    return PeerHeard(sender.adapter, sender.role, sender.term)
