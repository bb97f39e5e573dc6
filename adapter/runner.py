"""The feed adapter process: sockets, clock and the hot path around the pure cores.

Theory of operation
-------------------
One thread runs a blocking loop over a ``zmq.Poller`` (measured faster than
asyncio for the per-message path, and it keeps every piece of state in one
thread, so nothing needs a lock):

* source frames → split (``proto.fix``) → drop duplicates / spot gaps
  (:class:`~adapter.sequencer.Sequencer`) → convert (:mod:`adapter.conversion`)
  → number → packetize (``proto.wire.PacketBuilder``) → publish on the line
  when :attr:`SyncState.is_publishing`;
* sync-bus frames → :mod:`adapter.syncbus` → events for :mod:`adapter.sync`,
  whose actions (heartbeats, health, snapshots, role changes) run here;
* timers → ``Tick`` at :func:`adapter.sync.next_deadline`, idle line heartbeats;
* an optional REP control socket (JSON) for operators, drills and tests;
* journal and replay (``--journal``/``--replay``): every published message is
  appended to the journal (:mod:`adapter.journal`) as it goes into a packet,
  checkpoints of the conversion state are written every N messages or T
  seconds, an optional ROUTER socket answers replay requests from the journal
  (:mod:`adapter.replay`), and at start-up, before the sync rules decide the
  role, the adapter recovers its numbering and conversion state from the
  journal (:mod:`adapter.recovery`).

Packets are flushed when full and whenever the loop has drained what was
ready, never on a fixed delay, so batching adds no latency at low rates.
While deciding its role at start-up the adapter leaves source frames queued
in ZeroMQ (the SUB's high-water mark is unbounded) and reads them afterwards.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final

import psutil
import zmq

from adapter import recovery, syncbus, transport
from adapter.admin_link import AdminLink
from adapter.config import RING_SIZE, SOURCE_BATCH_FRAMES, SOURCE_BUDGET_S, AdapterConfig
from adapter.conversion import Converter, ConverterTable, SourceMessage, encode_update, peek_source_seq
from adapter.errors import ConversionError
from adapter.health import HealthSample, health_score
from adapter.journal import JournalConfig, JournalReader, JournalWriter
from adapter.journal.segment import list_segments
from adapter.replay import ReplayService
from adapter.sequencer import Sequencer, SourceVerdict
from adapter.state import ConversionState
from adapter.sync import (
    Action,
    ActiveReported,
    ArrivalChecked,
    CommandKind,
    CommandRejected,
    OperatorCommand,
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
    SyncState,
    SyncStatus,
    Tick,
    initial_state,
    next_deadline,
    on_event,
)
from admin_server import AdapterRegistration, AdapterRole, AdapterStatus
from admin_server import CommandKind as AdminCommandKind
from admin_server import SyncStatus as AdminSyncStatus
from proto import fix, wire

logger = logging.getLogger(__name__)

_ADMIN_ROLES: Final = {
    Role.ACTIVE: AdapterRole.ACTIVE,
    Role.BACKUP: AdapterRole.BACKUP,
    Role.FAILED: AdapterRole.FAILED,
}
_ADMIN_SYNC: Final = {
    SyncStatus.IN_SYNC: AdminSyncStatus.IN_SYNC,
    SyncStatus.SYNCING: AdminSyncStatus.SYNCING,
    SyncStatus.AHEAD: AdminSyncStatus.AHEAD,
    SyncStatus.FAILED: AdminSyncStatus.FAILED,
}
_OPERATOR_COMMANDS: Final = {
    AdminCommandKind.PROMOTE: CommandKind.PROMOTE,
    AdminCommandKind.DEMOTE: CommandKind.DEMOTE,
    AdminCommandKind.FAIL: CommandKind.FAIL,
}

StatusSink = Callable[[dict[str, Any]], None]


class AdapterRunner:
    """Runs one feed adapter until ``stop`` is set.

    Args:
        config: the adapter's configuration.
        on_status: receives status events (ready, role changes, final counters)
            as dicts; the command line prints them as JSON lines.
    """

    def __init__(self, config: AdapterConfig, *, on_status: StatusSink | None = None) -> None:
        self.config = config
        self._on_status = on_status or (lambda _event: None)
        self.converter = Converter(ConverterTable.load(config.converter_table))
        self.conversion = ConversionState()
        self.sequencer = Sequencer()
        self.sync: SyncState = initial_state(
            adapter=config.adapter, want_active=config.want_active, term=config.term, now=time.monotonic()
        )
        self._builder = wire.PacketBuilder(config.max_packet_bytes)
        self._ring: deque[SourceMessage] = deque(maxlen=RING_SIZE)
        self._pending_snapshot: Any = None  # a SyncMessage carrying a snapshot ahead of us
        self._pause_until = 0.0
        self._rate_limit = 0.0  # operator throttle, messages/s (0: none)
        self._last_line_send = 0.0
        self._active_position = 0
        self._process = psutil.Process()
        self._process.cpu_percent(None)
        self._rate_mark = (time.monotonic(), 0)
        self._admin: AdminLink | None = None
        # Journal, checkpoints and replay (all None/idle without --journal).
        self._journal: JournalWriter | None = None
        self._replay_service: ReplayService | None = None
        self._replay: zmq.Socket[bytes] | None = None
        self._journaled_source_seq = 0  # source_seq of the last journaled message
        self._since_checkpoint = 0
        self._checkpoint_at = time.monotonic()
        self.recovered: recovery.RecoverySummary | None = None
        # Fault injection (control "drop"): skip sending every k-th packet, n times.
        self._drop_every = 0
        self._drop_left = 0
        self._drop_tick = 0
        self.counters = dict.fromkeys(
            (
                "published",
                "packets",
                "heartbeats",
                "malformed_frames",
                "malformed_messages",
                "conversion_errors",
                "duplicates",
                "source_gaps",
                "sync_garbage",
                "snapshots_sent",
                "snapshots_adopted",
                "journaled",
                "journal_skipped",
                "checkpoints",
                "dropped_packets",
                "replay_requests",
            ),
            0,
        )

    def __repr__(self) -> str:
        return (
            f"<AdapterRunner [adapter={self.config.adapter}, role={self.sync.role.value}, "
            f"term={self.sync.term}, next_msg_seq={self.sequencer.next_msg_seq}]>"
        )

    # ---- the loop -------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Bind, connect and serve until ``stop`` is set; close every socket on the way out."""
        cfg = self.config
        ctx = zmq.Context.instance()
        sockets: list[zmq.Socket[bytes]] = []

        def make(kind: int) -> zmq.Socket[bytes]:
            sock: zmq.Socket[bytes] = ctx.socket(kind)
            sock.linger = 0
            sockets.append(sock)
            return sock

        try:
            # Recovery first: the sync rules must start from the recovered position.
            self._open_journal()
            self._line = make(zmq.PUB)
            self._line.sndhwm = cfg.sndhwm
            transport.configure_socket(self._line, cfg.line_endpoint)  # epgm://: buffers, ZMQ_RATE
            self._line.bind(cfg.line_endpoint)
            self._sync_pub = make(zmq.PUB)
            self._sync_pub.sndhwm = 10_000
            self._sync_pub.bind(cfg.sync_endpoint)
            self._sync_sub = make(zmq.SUB)
            self._sync_sub.subscribe(b"")
            for peer in cfg.peers:
                self._sync_sub.connect(peer)
            self._source = make(zmq.SUB)
            self._source.rcvhwm = 0
            self._source.subscribe(cfg.source_stream.encode())
            self._source.connect(cfg.source_endpoint)
            self._control = None
            if cfg.control_endpoint:
                self._control = make(zmq.REP)
                self._control.bind(cfg.control_endpoint)
            if cfg.replay_endpoint:
                self._replay = make(zmq.ROUTER)
                self._replay.sndhwm = 0
                self._replay.bind(cfg.replay_endpoint)
            self._status(
                "ready",
                line=cfg.line_endpoint,
                sync=cfg.sync_endpoint,
                replay=cfg.replay_endpoint,
                next_msg_seq=self.sequencer.next_msg_seq,
            )
            if cfg.admin:
                self._admin = self._start_admin_link(cfg.admin)
            self._loop(stop)
        finally:
            if self._admin is not None:
                self._admin.stop()
            self._status("stopped", **self.snapshot_status())
            for sock in sockets:
                sock.close(linger=0)
            if self._journal is not None:
                self._journal.close()

    def _loop(self, stop: threading.Event) -> None:
        with_source = zmq.Poller()
        without_source = zmq.Poller()
        for poller in (with_source, without_source):
            poller.register(self._sync_sub, zmq.POLLIN)
            if self._control is not None:
                poller.register(self._control, zmq.POLLIN)
            if self._replay is not None:
                poller.register(self._replay, zmq.POLLIN)
        with_source.register(self._source, zmq.POLLIN)
        while not stop.is_set():
            now = time.monotonic()
            deadline = min(next_deadline(self.sync, self.config.sync, now=now), now + 0.1)
            if self.sync.is_publishing:
                deadline = min(deadline, self._last_line_send + self.config.line_heartbeat_s)
            reading = not self.sync.deciding and now >= self._pause_until
            if not self.sync.deciding and not reading:
                deadline = min(deadline, self._pause_until)
            poller = with_source if reading else without_source
            ready = dict(poller.poll(max(0.0, deadline - now) * 1000.0))
            if self._sync_sub in ready:
                self._drain_sync()
            if self._control is not None and self._control in ready:
                self._serve_control()
            if self._replay is not None and self._replay in ready:
                self._serve_replay()
            if self._admin is not None:
                self._drain_admin_commands()
            if self._source in ready:
                self._drain_source()
                # Heartbeats that arrived while we converted must count before
                # the election timer is looked at, or a busy backup would
                # promote itself over a live active.
                self._drain_sync()
            self._flush()
            now = time.monotonic()
            if self._journal is not None:
                self._maybe_checkpoint(now)
            if now >= next_deadline(self.sync, self.config.sync, now=now):
                self._apply(Tick())
            if self.sync.is_publishing and now - self._last_line_send >= self.config.line_heartbeat_s:
                self._send_line_heartbeat()

    # ---- source path (hot) ------------------------------------------------------

    def _drain_source(self) -> None:
        recv = self._source.recv_multipart
        count = 0
        # Bounded by frames and by time, so heartbeats and sync messages are
        # never starved by a burst of source data.
        budget_end = time.monotonic() + SOURCE_BUDGET_S
        for _ in range(SOURCE_BATCH_FRAMES):
            if count and time.monotonic() >= budget_end:
                break
            try:
                frames = recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            if len(frames) != 2:
                self.counters["malformed_frames"] += 1
                continue
            count += self._on_source_payload(frames[1])
            if self.sync.throttled or self._rate_limit:
                break
        if count and (self.sync.throttled or self._rate_limit):
            pause = count * self.config.sync.throttle_pause_s / self.config.sync.throttle_every
            if self._rate_limit:
                pause = max(pause, count / self._rate_limit)
            self._pause_until = time.monotonic() + pause

    def _on_source_payload(self, payload: bytes) -> int:
        bodies, malformed = fix.split_messages(payload)
        if malformed:
            self.counters["malformed_messages"] += malformed
        sequencer = self.sequencer
        handled = 0
        for body in bodies:
            try:
                source_seq = peek_source_seq(body)
            except ConversionError:
                self.counters["conversion_errors"] += 1
                continue
            verdict = sequencer.check_source(source_seq)
            if verdict is SourceVerdict.DUPLICATE:
                self.counters["duplicates"] += 1
                continue
            if verdict is SourceVerdict.GAP:
                self.counters["source_gaps"] += 1
                self._apply(SourceGapSeen(source_seq - sequencer.next_source_seq))
            try:
                msg = self.converter.parse(body)
            except ConversionError as exc:
                self.counters["conversion_errors"] += 1
                logger.debug("source_seq %d skipped: %s", source_seq, exc)
                sequencer.skip_source(source_seq)
                continue
            self._process_message(msg)
            handled += 1
        return handled

    def _process_message(self, msg: SourceMessage) -> None:
        values = self.conversion.apply(msg)
        self._ring.append(msg)
        pending = self._pending_snapshot
        if pending is not None and pending.snapshot.source_seq == msg.source_seq:
            self._pending_snapshot = None
            self.conversion.restore(syncbus.snapshot_symbols(pending))
            values = self.conversion.get(msg.symbol) or values
            self.counters["snapshots_adopted"] += 1
            self._apply(SnapshotAdopted(msg.source_seq))
        sequencer = self.sequencer
        msg_seq = sequencer.assign(msg.source_seq)
        check = sequencer.record(msg.source_seq, msg_seq, self.conversion.digest)
        if self.sync.is_publishing:
            now_ns = time.time_ns()
            payload = encode_update(msg, values, publish_time_ns=now_ns)
            builder = self._builder
            if not builder.fits(len(payload)):
                self._flush()
            builder.add(msg_seq, self.config.source_stream_number, msg.source_seq, payload)
            self.counters["published"] += 1
            # Journal what is published, while it waits in the packet: the
            # append only frames it into the group-commit buffer (no syscall).
            if self._journal is not None:
                self._journal_append(msg_seq, now_ns, msg.source_seq, payload)
        if check is not None and self.sync.role is Role.BACKUP:
            self._apply(ArrivalChecked(check.renumbered, check.digest_matches))

    def _flush(self) -> None:
        if not self._builder.count:
            return
        packet = self._builder.build(
            channel=self.config.channel_number,
            adapter=self.config.adapter,
            term=self.sync.term,
            send_time_ns=time.time_ns(),
        )
        if self._drop_left and self._should_drop():
            # Fault injection: the packet is journaled but never sent.
            self.counters["dropped_packets"] += 1
        else:
            self._line.send_multipart((self.config.channel.encode(), packet), copy=False)
            self.counters["packets"] += 1
        self._last_line_send = time.monotonic()

    def _send_line_heartbeat(self) -> None:
        packet = wire.encode_packet(
            channel=self.config.channel_number,
            adapter=self.config.adapter,
            term=self.sync.term,
            first_seq=self.sequencer.next_msg_seq,
            blocks=(),
            send_time_ns=time.time_ns(),
        )
        self._line.send_multipart((self.config.channel.encode(), packet))
        self.counters["heartbeats"] += 1
        self._last_line_send = time.monotonic()

    # ---- journal, checkpoints, replay ------------------------------------------------

    def _open_journal(self) -> None:
        """Open the journal (cutting a torn tail) and recover numbering and state from it."""
        cfg = self.config
        if cfg.journal_dir is None:
            return
        journal = self._journal = JournalWriter(
            cfg.journal_dir,
            JournalConfig(
                fsync=cfg.journal_fsync,
                retention_max_age_s=cfg.retention_max_age_s,
                retention_max_bytes=cfg.retention_max_bytes,
            ),
        )
        report = journal.recovery_report
        summary = recovery.recover_state(
            JournalReader(cfg.journal_dir), journal.latest_checkpoint(), self.conversion, self.sequencer
        )
        self.recovered = summary
        self._journaled_source_seq = summary.last_source_seq
        self._status(
            "recovered",
            **summary.as_dict(),
            journal_cut_bytes=report.bytes_cut,
            journal_cut_reason=report.reason,
        )
        if cfg.replay_endpoint:
            self._replay_service = ReplayService(
                JournalReader(cfg.journal_dir),
                channel=cfg.channel_number,
                adapter=cfg.adapter,
                max_packet_bytes=cfg.max_packet_bytes,
                max_bytes=cfg.replay_max_bytes,
                bounds=self._journal_bounds,
                before_read=self._journal_flush_for,
            )

    def _journal_append(self, msg_seq: int, time_ns: int, source_seq: int, payload: bytes) -> None:
        journal = self._journal
        assert journal is not None
        if msg_seq <= journal.last_msg_seq:
            # Renumbered backwards (rule 2 after an episode of bad numbering):
            # the journal keeps one record per msg_seq, the first one written.
            self.counters["journal_skipped"] += 1
            return
        journal.append(msg_seq, time_ns, self.config.source_stream_number, source_seq, payload)
        self.counters["journaled"] += 1
        self._journaled_source_seq = source_seq
        self._since_checkpoint += 1

    def _maybe_checkpoint(self, now: float) -> None:
        # A checkpoint is the conversion state *at* the last journaled message,
        # so it is taken only when nothing was converted after that message.
        journal = self._journal
        assert journal is not None
        due = self._since_checkpoint >= self.config.checkpoint_every or (
            self._since_checkpoint and now - self._checkpoint_at >= self.config.checkpoint_interval_s
        )
        if not due or self._journaled_source_seq != self.sequencer.last_source_seq:
            return
        blob = recovery.encode_checkpoint_state(
            self.conversion.snapshot(),
            source_stream=self.config.source_stream_number,
            source_seq=self._journaled_source_seq,
            next_msg_seq=journal.last_msg_seq + 1,
        )
        journal.write_checkpoint(journal.last_msg_seq, blob)
        self._since_checkpoint = 0
        self._checkpoint_at = time.monotonic()
        self.counters["checkpoints"] += 1
        # Retention runs here, after a checkpoint, so recovery never needs a deleted segment.
        if self.config.retention_max_age_s is not None or self.config.retention_max_bytes is not None:
            journal.apply_retention(now_ns=time.time_ns())

    def _journal_bounds(self) -> tuple[int, int]:
        """(oldest, newest) msg_seq in the journal, (0, 0) when empty."""
        assert self._journal is not None and self.config.journal_dir is not None
        newest = max(self._journal.last_msg_seq, 0)
        segments = list_segments(self.config.journal_dir)
        return (segments[0].first_seq if segments and newest else 0), newest

    def _journal_flush_for(self, last_seq: int) -> None:
        # Records still in the group-commit buffer are invisible to readers;
        # write them out (no fsync needed: readers see written bytes).
        assert self._journal is not None
        self._journal.flush(sync=False)

    def _serve_replay(self) -> None:
        assert self._replay is not None and self._replay_service is not None
        # Bounded per wake-up, so replay never starves the source or the sync bus.
        for _ in range(8):
            try:
                frames = self._replay.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self.counters["replay_requests"] += 1
            reply = self._replay_service.answer(frames, term=self.sync.term, send_time_ns=time.time_ns())
            self._replay.send_multipart(reply)

    def _should_drop(self) -> bool:
        self._drop_tick += 1
        if self._drop_tick % self._drop_every:
            return False
        self._drop_left -= 1
        return True

    # ---- sync bus -----------------------------------------------------------------

    def _drain_sync(self) -> None:
        for _ in range(1000):
            try:
                data = self._sync_sub.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                msg = syncbus.decode_sync(data, channel=self.config.channel_number)
            except syncbus.SyncDecodeError:
                self.counters["sync_garbage"] += 1
                continue
            if msg.adapter != self.config.adapter:
                self._on_sync_message(msg)

    def _on_sync_message(self, msg: Any) -> None:
        self._apply(syncbus.peer_heard(msg))
        kind = msg.WhichOneof("body")
        from_active = msg.adapter == self.sync.active and msg.term == self.sync.term
        if kind == "stream_state" and from_active and self.sync.role is Role.BACKUP:
            report = syncbus.position_report(msg)
            if report is not None:
                self._active_position = report.source_seq
                verdict, ahead_by = self.sequencer.compare(report)
                self._apply(ActiveReported(msg.adapter, msg.term, verdict, ahead_by))
        elif kind == "snapshot_request":
            self._apply(SnapshotRequested(msg.adapter, msg.snapshot_request.target_adapter))
        elif kind == "snapshot" and from_active and self.sync.role is Role.BACKUP:
            self._adopt_snapshot(msg)

    def _adopt_snapshot(self, msg: Any) -> None:
        at = msg.snapshot.source_seq
        last = self.sequencer.last_source_seq
        if last < at:
            self._pending_snapshot = msg  # applied when we reach ``at``
            return
        replay = [m for m in self._ring if m.source_seq > at]
        if replay and replay[0].source_seq != at + 1 and last > at:
            logger.info("snapshot at %d is older than our replay ring; waiting for a newer one", at)
            return
        self.conversion.restore(syncbus.snapshot_symbols(msg))
        digests = {at: self.conversion.digest}
        for m in replay:
            self.conversion.apply(m)
            digests[m.source_seq] = self.conversion.digest
        self.sequencer.restate_digests(digests)
        self.counters["snapshots_adopted"] += 1
        self._apply(SnapshotAdopted(at))

    # ---- state machine glue ------------------------------------------------------------

    def _apply(self, event: SyncEvent) -> None:
        was_publishing = self.sync.is_publishing
        self.sync, actions = on_event(self.sync, event, now=time.monotonic(), config=self.config.sync)
        if was_publishing and not self.sync.is_publishing:
            self._builder = wire.PacketBuilder(self.config.max_packet_bytes)  # held output is dropped
        for action in actions:
            self._act(action)

    def _act(self, action: Action) -> None:
        cfg = self.config
        now_ns = time.time_ns()
        if isinstance(action, SendStreamState):
            data = syncbus.encode_stream_state(
                self.sync,
                self.sequencer,
                channel=cfg.channel_number,
                source_stream=cfg.source_stream_number,
                send_time_ns=now_ns,
            )
            self._sync_pub.send(data)
        elif isinstance(action, SendHealth):
            self._send_health(now_ns)
        elif isinstance(action, RequestSnapshot):
            self._sync_pub.send(
                syncbus.encode_snapshot_request(
                    self.sync, channel=cfg.channel_number, target=action.target, send_time_ns=now_ns
                )
            )
        elif isinstance(action, SendSnapshot):
            self._sync_pub.send(
                syncbus.encode_snapshot(
                    self.sync,
                    self.conversion.snapshot(),
                    self.sequencer,
                    channel=cfg.channel_number,
                    source_stream=cfg.source_stream_number,
                    send_time_ns=now_ns,
                )
            )
            self.counters["snapshots_sent"] += 1
        elif isinstance(action, RoleChanged):
            logger.info(
                "adapter %d: %s -> %s, term %d, next msg_seq %d (%s)",
                cfg.adapter,
                action.old.value,
                action.new.value,
                action.term,
                self.sequencer.next_msg_seq,
                action.reason,
            )
            self._flush()
            self._status(
                "role",
                old=action.old.value,
                new=action.new.value,
                term=action.term,
                reason=action.reason,
                next_msg_seq=self.sequencer.next_msg_seq,
            )
        elif isinstance(action, SendFailed):
            self._sync_pub.send(
                syncbus.encode_failed(
                    self.sync, channel=cfg.channel_number, reason=action.reason, send_time_ns=now_ns
                )
            )
        elif isinstance(action, CommandRejected):
            logger.warning("command %s rejected: %s", action.kind.value, action.reason)

    def _send_health(self, now_ns: int) -> None:
        now = time.monotonic()
        mark_time, mark_count = self._rate_mark
        rate = (self.counters["published"] - mark_count) / max(now - mark_time, 1e-6)
        self._rate_mark = (now, self.counters["published"])
        errors = self.counters["malformed_messages"] + self.counters["conversion_errors"]
        lag = (
            max(0, self._active_position - self.sequencer.last_source_seq)
            if self.sync.role is Role.BACKUP
            else 0
        )
        sample = HealthSample(
            available_memory_mb=psutil.virtual_memory().available / 2**20,
            cpu_percent=self._process.cpu_percent(None),
            error_count=errors,
            message_rate=rate,
            lag=lag,
            penalty=self.config.health_penalty,
        )
        self.sync = replace(self.sync, health_score=health_score(sample))
        self._sync_pub.send(
            syncbus.encode_health(
                self.sync,
                channel=self.config.channel_number,
                send_time_ns=now_ns,
                available_memory_mb=sample.available_memory_mb,
                cpu_percent=sample.cpu_percent,
                error_count=errors,
                message_rate=rate,
                lag=lag,
            )
        )

    # ---- admin server ----------------------------------------------------------------

    def _start_admin_link(self, target: str) -> AdminLink:
        cfg = self.config
        registration = AdapterRegistration(
            feed=cfg.feed,
            channel_name=cfg.channel,
            channel_number=cfg.channel_number,
            adapter_id=cfg.adapter_id,
            line_endpoint=cfg.line_endpoint,
            replay_endpoint=cfg.replay_endpoint or "",
            sync_endpoint=cfg.sync_endpoint,
            role=_ADMIN_ROLES[self.sync.role],
            term=self.sync.term,
        )
        link = AdminLink(target, registration, self._admin_status, credentials=cfg.admin_credentials)
        link.start()
        return link

    def _admin_status(self) -> AdapterStatus:
        # Called on the admin link's thread: plain reads of fields the loop
        # replaces whole, so a report is at worst one step stale.
        sync = self.sync
        lag = max(0, self._active_position - self.sequencer.last_source_seq)
        status = _ADMIN_SYNC[sync.status]
        if (
            sync.role is Role.BACKUP
            and status is AdminSyncStatus.IN_SYNC
            and lag > self.config.sync.ahead_tolerance
        ):
            status = AdminSyncStatus.BEHIND
        return AdapterStatus(
            role=_ADMIN_ROLES[sync.role],
            term=sync.term,
            next_msg_seq=self.sequencer.next_msg_seq,
            sync_status=status,
            health_score=sync.health_score,
            lag=lag if sync.role is Role.BACKUP else 0,
        )

    def _drain_admin_commands(self) -> None:
        assert self._admin is not None
        while not self._admin.commands.empty():
            command = self._admin.commands.get_nowait()
            logger.info(
                "operator command %s from %s: %s", command.kind.value, command.issued_by, command.reason
            )
            if command.kind is AdminCommandKind.THROTTLE:
                self._rate_limit = max(0.0, command.rate)
            else:
                reason = command.reason or f"operator {command.issued_by}".strip()
                self._apply(OperatorCommand(_OPERATOR_COMMANDS[command.kind], reason))

    # ---- control socket -------------------------------------------------------------

    def _serve_control(self) -> None:
        assert self._control is not None
        try:
            request = json.loads(self._control.recv())
            reply = self.control(str(request.get("cmd", "")), request)
        except (ValueError, AttributeError, TypeError) as exc:
            reply = {"ok": False, "error": f"bad request: {exc}"}
        self._control.send(json.dumps(reply).encode())

    def control(self, cmd: str, request: dict[str, Any]) -> dict[str, Any]:
        """Handle one operator/drill command; returns the JSON-able reply."""
        kinds = {"promote": CommandKind.PROMOTE, "demote": CommandKind.DEMOTE, "fail": CommandKind.FAIL}
        if cmd == "status":
            return {"ok": True, **self.snapshot_status()}
        if cmd in kinds:
            self._apply(OperatorCommand(kinds[cmd], str(request.get("reason", "operator"))))
            return {"ok": True, **self.snapshot_status()}
        if cmd == "throttle":
            self._rate_limit = max(0.0, float(request["rate"]))
            return {"ok": True, "rate": self._rate_limit}
        if cmd == "drop":
            # Fault injection for tests: skip sending every k-th packet, n times (still journaled).
            self._drop_every = max(1, int(request.get("every", 1)))
            self._drop_left = max(0, int(request.get("count", 1)))
            self._drop_tick = 0
            return {"ok": True, "every": self._drop_every, "count": self._drop_left}
        if cmd == "penalty":
            self.config = replace(self.config, health_penalty=float(request["value"]))
            return {"ok": True}
        if cmd == "corrupt_state":
            # Fault injection for drills and tests: skew every symbol's volume.
            for symbol, values in self.conversion.snapshot().items():
                values.volume += int(request.get("delta", 1000))
                self.conversion.set_symbol(symbol, values)
            self.sequencer.restate_digests({self.sequencer.last_recorded_source_seq: self.conversion.digest})
            return {"ok": True, "digest": self.conversion.digest}
        return {"ok": False, "error": f"unknown command {cmd!r}"}

    def snapshot_status(self) -> dict[str, Any]:
        """Role, term, position and counters, for status replies and the registry."""
        sync = self.sync
        return {
            "adapter": self.config.adapter,
            "channel": self.config.channel,
            "role": sync.role.value,
            "status": sync.status.value,
            "term": sync.term,
            "active": sync.active,
            "throttled": sync.throttled,
            "health": round(sync.health_score, 1),
            "next_msg_seq": self.sequencer.next_msg_seq,
            "last_source_seq": self.sequencer.last_source_seq,
            "digest": self.conversion.digest,
            "symbols": len(self.conversion),
            "journal_last_msg_seq": None if self._journal is None else self._journal.last_msg_seq,
            **self.counters,
        }

    def _status(self, event: str, **fields: Any) -> None:
        self._on_status({"event": event, "adapter": self.config.adapter, "time_ns": time.time_ns(), **fields})
