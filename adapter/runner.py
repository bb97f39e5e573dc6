"""The feed adapter process: sockets, clock and the hot path around the pure cores.

Theory of operation
-------------------
One thread runs a blocking loop over a ``zmq.Poller`` (measured faster than
asyncio for the per-message path, and it keeps every piece of state in one
thread, so nothing needs a lock):

* source frames → split (``proto.fix``) → drop duplicates / spot gaps
  (:class:`~adapter.sequencer.Sequencer`) → convert (:mod:`adapter.conversion`)
  → number → packetize (``proto.wire.PacketBuilder``) → publish on the line
  when :attr:`SyncState.is_publishing`. Runs of ordinary in-order messages
  take the C fast path (:mod:`adapter.fastpath`), which does all of that in
  one call per run; it stops before any message that is unusual or sits at a
  position the sync rules watch (a pending report or snapshot), and that one
  message goes through the Python path;
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

import logging
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final

import psutil
import zmq

import transport
from adapter import fastpath, syncbus
from adapter.admin_link import AdminLink
from adapter.config import RING_SIZE, SOURCE_BATCH_FRAMES, SOURCE_BUDGET_S, AdapterConfig
from adapter.conversion import Converter, ConverterTable, SourceMessage, encode_update, peek_source_seq
from adapter.errors import ConversionError
from adapter.health import HealthSample, health_score
from adapter.operations import OperationsMixin
from adapter.persistence import JournalKeeper
from adapter.sequencer import Sequencer, SourceVerdict
from adapter.sync import (
    Action,
    ActiveReported,
    ArrivalChecked,
    CommandRejected,
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
    Tick,
    initial_state,
    next_deadline,
    on_event,
)
from proto import fix, wire

logger = logging.getLogger(__name__)

_STOP_END: Final = 0  # adapter._fastpath.STOP_END: the frame is done
_STOP_SLOW: Final = 1  # the message at pos needs the Python path
_SNDMORE: Final = int(zmq.SNDMORE)

StatusSink = Callable[[dict[str, Any]], None]


class AdapterRunner(OperationsMixin):
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
        self.conversion = fastpath.new_conversion_state()
        self._fast = fastpath.make_fast_path(self.converter.table, self.conversion)
        self.sequencer = Sequencer()
        self.sync: SyncState = initial_state(
            adapter=config.adapter, want_active=config.want_active, term=config.term, now=time.monotonic()
        )
        self._builder = wire.PacketBuilder(config.max_packet_bytes)
        self._topic = config.channel.encode()
        # Recent source frames and how many messages each carried: what a
        # snapshot adopted behind our position is replayed from.
        self._ring: deque[tuple[bytes, int]] = deque()
        self._ring_count = 0
        self._pending_snapshot: Any = None  # a SyncMessage carrying a snapshot ahead of us
        self._pause_until = 0.0
        self._rate_limit = 0.0  # operator throttle, messages/s (0: none)
        self._last_line_send = 0.0
        self._active_position = 0
        self._process = psutil.Process()
        self._process.cpu_percent(None)
        self._rate_mark = (time.monotonic(), 0)
        self._admin: AdminLink | None = None
        self._control: zmq.Socket[bytes] | None = None
        self._replay: zmq.Socket[bytes] | None = None
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
        # Journal, checkpoints and replay (--journal): None without a journal.
        self.journal = (
            None
            if config.journal_dir is None
            else JournalKeeper(config, self.conversion, self.sequencer, self.counters, self._status)
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
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        sockets: list[zmq.Socket[bytes]] = []

        def make(kind: int) -> zmq.Socket[bytes]:
            sock: zmq.Socket[bytes] = ctx.socket(kind)
            sock.linger = 0
            sockets.append(sock)
            return sock

        try:
            # Recovery first: the sync rules must start from the recovered position.
            if self.journal is not None:
                self.journal.open()
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
            if cfg.control_endpoint:
                self._control = make(zmq.REP)
                self._control.bind(cfg.control_endpoint)
            if self.journal is not None and self.journal.replay is not None:
                self._replay = make(zmq.ROUTER)
                self._replay.sndhwm = 0
                self._replay.bind(str(cfg.replay_endpoint))  # set: the replay service exists
            self._status(
                "ready",
                line=cfg.line_endpoint,
                sync=cfg.sync_endpoint,
                replay=cfg.replay_endpoint,
                next_msg_seq=self.sequencer.next_msg_seq,
                fast_path=self._fast is not None,
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
            if self.journal is not None:
                self.journal.close()

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
            ready = dict(poller.poll(max(0, round((deadline - now) * 1000.0))))
            if self._sync_sub in ready:
                self._drain_sync()
            if self._control is not None and self._control in ready:
                self._serve_control()
            if self._replay is not None and self._replay in ready:
                assert self.journal is not None
                self.journal.serve(self._replay, term=self.sync.term)
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
            if self.journal is not None:
                self.journal.maybe_checkpoint(now)
            if now >= next_deadline(self.sync, self.config.sync, now=now):
                self._apply(Tick())
            if self.sync.is_publishing and now - self._last_line_send >= self.config.line_heartbeat_s:
                self._send_line_heartbeat()

    # ---- source path (hot) ------------------------------------------------------

    def _drain_source(self) -> None:
        source = self._source
        count = 0
        # Bounded by frames and by time, so heartbeats and sync messages are
        # never starved by a burst of source data.
        budget_end = time.monotonic() + SOURCE_BUDGET_S
        for _ in range(SOURCE_BATCH_FRAMES):
            if count and time.monotonic() >= budget_end:
                break
            try:
                frames = transport.recv_frames(source)
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
        handled = self._convert_fast(payload) if self._fast is not None else self._convert_slow(payload)
        if handled:
            ring = self._ring
            ring.append((payload, handled))
            self._ring_count += handled
            while self._ring_count - ring[0][1] >= RING_SIZE:
                self._ring_count -= ring.popleft()[1]
        return handled

    def _convert_fast(self, payload: bytes) -> int:
        fast = self._fast
        assert fast is not None
        sequencer = self.sequencer
        cfg = self.config
        stream = cfg.source_stream_number
        journal = self.journal
        end = len(payload)
        pos = handled = 0
        while pos < end:
            last = sequencer.last_source_seq
            publishing = self.sync.is_publishing
            builder = self._builder
            if publishing:
                room = builder.room()
                max_count = wire.MAX_COUNT - builder.count
            else:
                room, max_count = 1 << 62, 1 << 30
            first_msg_seq = sequencer.next_msg_seq
            now_ns = time.time_ns()
            pos, count, stop, blocks, first_seq, digests, payloads = fast.run(
                payload,
                pos,
                last + 1 if last else 0,
                first_msg_seq,
                self._watched_position(),
                room,
                max_count,
                now_ns,
                stream,
                publishing,
                publishing and journal is not None,
            )
            if count:
                handled += count
                sequencer.record_run(first_seq, first_msg_seq, digests)
                if publishing:
                    builder.add_blocks(first_msg_seq, count, blocks)
                    self.counters["published"] += count
                    if journal is not None:
                        assert payloads is not None  # asked for: publishing with a journal
                        seqs = array("q", range(first_seq, first_seq + count))
                        journal.append_batch(first_msg_seq, now_ns, seqs, payloads)
            if stop == _STOP_SLOW:
                body, pos = fix.next_message(payload, pos)
                if body is None:
                    self.counters["malformed_messages"] += 1
                else:
                    handled += self._on_body(body)
            elif stop != _STOP_END:  # the packet is full (room or block count)
                self._flush()
        return handled

    def _watched_position(self) -> int:
        """The lowest source position the sync rules watch (0: none): the fast path stops before it."""
        watched = self.sequencer.first_pending()
        pending = self._pending_snapshot
        if pending is not None:
            at = pending.snapshot.source_seq
            watched = at if not watched else min(watched, at)
        return watched

    def _convert_slow(self, payload: bytes) -> int:
        bodies, malformed = fix.split_messages(payload)
        if malformed:
            self.counters["malformed_messages"] += malformed
        on_body = self._on_body
        return sum(on_body(body) for body in bodies)

    def _on_body(self, body: bytes) -> int:
        """Take one message body through the Python path; 1 if it was converted."""
        try:
            msg = self.converter.parse(body)
        except ConversionError as exc:
            self._on_unconvertible(body, exc)
            return 0
        # Parsed first: in order is the common case, and the parsed message
        # carries its source_seq (a separate peek cost ~4% of the adapter).
        sequencer = self.sequencer
        source_seq = msg.source_seq
        verdict = sequencer.check_source(source_seq)
        if verdict is SourceVerdict.DUPLICATE:
            self.counters["duplicates"] += 1
            return 0
        if verdict is SourceVerdict.GAP:
            self.counters["source_gaps"] += 1
            self._apply(SourceGapSeen(source_seq - sequencer.next_source_seq))
        self._process_message(msg)
        return 1

    def _on_unconvertible(self, body: bytes, exc: ConversionError) -> None:
        self.counters["conversion_errors"] += 1
        try:
            source_seq = peek_source_seq(body)
        except ConversionError:
            return  # not even sequenced: nothing to account for
        logger.debug("source_seq %d skipped: %s", source_seq, exc)
        if self.sequencer.check_source(source_seq) is SourceVerdict.NEXT:
            # Every adapter skips the same bytes the same way, so numbering stays aligned.
            self.sequencer.skip_source(source_seq)

    def _process_message(self, msg: SourceMessage) -> None:
        values = self.conversion.apply(msg)
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
            if self.journal is not None:
                self.journal.append(msg_seq, now_ns, msg.source_seq, payload)
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
            self._send_packet(packet)
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
        self._send_packet(packet)
        self.counters["heartbeats"] += 1
        self._last_line_send = time.monotonic()

    def _send_packet(self, packet: bytes) -> None:
        # Two sends with int flags: send_multipart builds the flags with
        # IntFlag arithmetic per frame, ~2 us a packet. Copying sends are
        # cheaper than zero-copy at these sizes.
        line = self._line
        line.send(self._topic, _SNDMORE)
        line.send(packet)

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
        replay = self._ring_messages(after=at)
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

    def _ring_messages(self, *, after: int) -> list[SourceMessage]:
        """The converted messages after source position ``after`` up to ours, re-parsed from the ring."""
        messages: list[SourceMessage] = []
        last = after
        upto = self.sequencer.last_source_seq
        for payload, _count in self._ring:
            for body in fix.split_messages(payload)[0]:
                try:
                    msg = self.converter.parse(body)
                except ConversionError:
                    continue  # skipped when it arrived too
                if last < msg.source_seq <= upto:
                    messages.append(msg)
                    last = msg.source_seq
        return messages

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
