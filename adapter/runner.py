"""The feed adapter process: sockets and clocks around the adapter core.

Theory of operation
-------------------
Every decision is :class:`~adapter.core.AdapterCore`'s. The runner is the
shell (STYLE.md §1): one thread runs a blocking loop over a ``zmq.Poller``
(measured faster than asyncio for the per-message path, and with all state
on one thread nothing needs a lock). Each turn of the loop it

1. polls until the core's next deadline, reading the source only while the
   core says so (:meth:`~adapter.core.AdapterCore.reads_source`: not while it
   decides its role, not while throttled -- frames wait in ZeroMQ);
2. feeds what arrived to the core -- sync-bus messages (decoded by
   :mod:`adapter.core.syncbus`), control requests (:mod:`adapter.core.commands`),
   operator commands from the admin link, source frames (bounded in count
   and time, so the sync bus is heard between bursts) -- and serves replay
   requests from the journal;
3. calls :meth:`~adapter.core.AdapterCore.on_tick` (seal the packet, timers);

and after every call carries out the actions the core returned: publish a
packet, journal records, write a checkpoint, send on the sync bus, report a
status. Packets are sealed whenever the loop has drained what was ready,
never on a fixed delay, so batching adds no latency at low rates. On a
multicast line they are then also sealed in the cryptographic sense
(:mod:`adapter.line_seal`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import psutil
import zmq

from feedha import transport
from feedha.adapter.access import DELAYED, LINE, REPLAY
from feedha.adapter.admin_link import AccessChange, AdminLink, SealChange
from feedha.adapter.config import (
    CONTROL_MAX_REQUEST_BYTES,
    SOURCE_BATCH_FRAMES,
    SOURCE_BUDGET_S,
    SOURCE_MAX_FRAME_BYTES,
    SOURCE_RCVHWM,
    SYNC_HWM,
    SYNC_MAX_MESSAGE_BYTES,
    AdapterConfig,
)
from feedha.adapter.conversion import ConverterTable, make_engine
from feedha.adapter.core import (
    Action,
    AdapterCore,
    CommandDone,
    JournalControl,
    JournalRecords,
    Publish,
    PublishDelayed,
    Quarantine,
    RecordTerm,
    SendSync,
    Status,
    WriteCheckpoint,
)
from feedha.adapter.core.commands import Command, ControlError, Purge, decode_request, encode_reply
from feedha.adapter.core.health import MachineSample
from feedha.adapter.core.syncbus import SyncDecodeError, decode_sync, encode_sync
from feedha.adapter.delayed_line import DelayedLineSocket
from feedha.adapter.journal.quarantine import QuarantineFile
from feedha.adapter.line_seal import LineSeal
from feedha.adapter.metrics import AdapterMetrics
from feedha.adapter.persistence import JournalKeeper
from feedha.adapter.zap import DataPlaneGuard

logger = logging.getLogger(__name__)

StatusSink = Callable[[dict[str, Any]], None]

SYNC_MESSAGES_PER_DRAIN: Final = 1000
MACHINE_SAMPLE_S: Final = 0.1  # how often psutil is asked for memory and CPU figures
_SNDMORE: Final = int(zmq.SNDMORE)


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
        engine = make_engine(ConverterTable.load(config.converter_table))
        self.core = AdapterCore(config.core(), engine, now=time.monotonic())
        self.guard = DataPlaneGuard.from_config(config)
        self.journal = None if config.journal_dir is None else JournalKeeper(config, self.guard)
        self._quarantine: QuarantineFile | None = None
        self._topic = config.channel.encode()
        self._sockets: list[zmq.Socket[bytes]] = []
        self._control: zmq.Socket[bytes] | None = None
        self._admin: AdminLink | None = None
        self._process = psutil.Process()
        self.seal = LineSeal(required=transport.is_multicast(config.line_endpoint) and self.guard.enabled)
        self._next_machine_sample = 0.0
        self._line_bound = True
        self.line_bytes = 0  # packet bytes handed to the line socket
        self.delayed_line: DelayedLineSocket | None = None
        self._control_waiting = ""  # the control socket's deferred reply (a purge waiting for acks)
        self._all_pollers: tuple[zmq.Poller, ...] = ()
        self._commands_seen = 0
        self.metrics = AdapterMetrics(config)

    def __repr__(self) -> str:
        return f"<AdapterRunner [{self.core!r}]>"

    # ---- life cycle ----------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Bind, connect and serve until ``stop`` is set; close every socket on the way out."""
        cfg = self.config
        try:
            metrics = self.metrics.serve()  # first: /healthz answers while the journal recovers
            self.guard.start(zmq.Context.instance())  # ZAP before any socket binds
            if self.journal is not None:  # recovery first: the sync rules start from its position
                self._status("recovered", **self.journal.open(self.core))
            if cfg.quarantine_path is not None:
                self._quarantine = QuarantineFile(cfg.quarantine_path)
            self._open_sockets()
            self._status(
                "ready",
                line=cfg.line_endpoint,
                sync=cfg.sync_endpoint,
                replay=cfg.replay_endpoint,
                next_msg_seq=self.core.sequencer.next_msg_seq,
                fast_path=self.core.engine.is_native,
                metrics=metrics,
                health=self.metrics.health_address,
            )
            if cfg.admin:
                public = "" if self.guard.keys is None else self.guard.keys.public.decode()
                self._admin = AdminLink(cfg, self.core.sync_view(), curve_public_key=public)
                self._admin.start()
            self._loop(stop)
        finally:
            if self._admin is not None:
                self._admin.stop()
            self._status("stopped", **self.status())
            for sock in self._sockets:
                sock.close(linger=0)
            if self.journal is not None:
                self.journal.close()
            if self._quarantine is not None:
                self._quarantine.close()
            if self.delayed_line is not None:
                self.delayed_line.close()
            self.guard.stop()
            self.metrics.close()

    def status(self) -> dict[str, Any]:
        """The core's status with the runner's own figures."""
        served = {} if self.journal is None else self.journal.served()
        status = {"channel": self.config.channel, **self.core.status(), **served}
        return {**status, "access": self.guard.status(), **self.seal.status()}

    def _socket(
        self, kind: int, *, rcvhwm: int | None = None, max_message: int | None = None
    ) -> zmq.Socket[bytes]:
        sock: zmq.Socket[bytes] = zmq.Context.instance().socket(kind)
        sock.linger = 0
        if rcvhwm is not None:
            sock.rcvhwm = rcvhwm
        if max_message is not None:  # a peer that sends more is disconnected by libzmq
            sock.setsockopt(zmq.MAXMSGSIZE, max_message)
        self._sockets.append(sock)
        return sock

    def _open_sockets(self) -> None:
        cfg = self.config
        self._line = self._open_line()
        self._sync_pub = self._socket(zmq.PUB)
        self._sync_pub.sndhwm = SYNC_HWM
        self._sync_sub = self._socket(zmq.SUB, rcvhwm=SYNC_HWM, max_message=SYNC_MAX_MESSAGE_BYTES)
        self.guard.secure_sync(self._sync_pub, self._sync_sub)
        self._sync_pub.bind(cfg.sync_endpoint)
        self._sync_sub.subscribe(b"")
        for peer in cfg.peers:
            self._sync_sub.connect(peer)
        self._source = self._socket(zmq.SUB, rcvhwm=SOURCE_RCVHWM, max_message=SOURCE_MAX_FRAME_BYTES)
        self.guard.secure_source(self._source)
        self._source.subscribe(cfg.source_stream.encode())
        self._source.connect(cfg.source_endpoint)
        if cfg.control_endpoint:
            self._control = self._socket(zmq.REP, rcvhwm=100, max_message=CONTROL_MAX_REQUEST_BYTES)
            self._control.bind(cfg.control_endpoint)
        if cfg.delayed_line_endpoint is not None and self.journal is not None:
            self.delayed_line = DelayedLineSocket(cfg, self.guard, self.journal)
            self.delayed_line.open()

    def _open_line(self, *, bind: bool = True) -> zmq.Socket[bytes]:
        cfg = self.config
        line = self._socket(self.guard.line_kind)
        line.sndhwm = cfg.sndhwm
        transport.configure_socket(line, cfg.line_endpoint)  # epgm://: buffers, ZMQ_RATE
        self.guard.secure(line, LINE)
        if bind:
            line.bind(cfg.line_endpoint)
        return line

    def _rebind(self, now: float) -> None:
        # ZAP is asked at connection time only: to cut off a revoked peer, every peer reconnects.
        for where in self.guard.due_rebinds(now=now, now_ns=time.time_ns()):
            logger.info("binding the %s afresh: a revoked key was connected to it", where)
            if where == LINE:
                self._sockets.remove(self._line)
                self._line.close(linger=0)
                self._line, self._line_bound = self._open_line(bind=False), False
                if self.journal is not None and self.journal.snapshots is not None:
                    self.journal.snapshots.rebind()  # it serves the line's subscribers too
            elif where == REPLAY and self.journal is not None and self.journal.replay is not None:
                self.journal.replay.rebind()
            elif where == DELAYED and self.delayed_line is not None:
                self.delayed_line.rebind()
        if self.delayed_line is not None:
            self.delayed_line.retry_bind()
        if not self._line_bound:  # until then packets go nowhere: subscribers fill from the other lines
            self._line_bound = transport.bind_again(self._line, self.config.line_endpoint)
            if not self._line_bound:
                logger.warning("the line's address is still in use; binding again next turn")

    # ---- the loop ------------------------------------------------------------------------

    def _pollers(self) -> tuple[zmq.Poller, zmq.Poller]:
        with_source, without_source = zmq.Poller(), zmq.Poller()
        for poller in (with_source, without_source):
            for sock in (self._sync_sub, self._control):
                if sock is not None:
                    poller.register(sock, zmq.POLLIN)
        with_source.register(self._source, zmq.POLLIN)
        return with_source, without_source

    def _loop(self, stop: threading.Event) -> None:
        core = self.core
        with_source, without_source = self._pollers()
        self._all_pollers = (with_source, without_source)
        while not stop.is_set():
            now = time.monotonic()
            poller = with_source if core.reads_source(now) else without_source
            timeout_ms = max(0, round((core.next_deadline(now) - now) * 1000.0))
            ready = dict(poller.poll(timeout_ms))
            try:
                self._turn(ready)
            except Exception:  # a bug must cost one turn of the loop, never the process
                logger.exception("internal fault in the adapter loop")
                self._carry_out(
                    core.on_fault("the adapter loop", now=time.monotonic(), wall_ns=time.time_ns())
                )

    def _turn(self, ready: dict[Any, int]) -> None:
        core = self.core
        if self._sync_sub in ready:
            self._drain_sync()
        if self._control is not None and self._control in ready:
            self._serve_control()
        if self.journal is not None:
            self.journal.flush_request.serve()  # the replay thread needs what the writer buffers
        if self._admin is not None:
            for command in self._admin.commands():
                now = time.monotonic()
                if isinstance(command, AccessChange):
                    self.guard.on_access(
                        command.grants, revoke=command.revoke, replace=command.replace, now=now
                    )
                elif isinstance(command, SealChange):
                    self.seal.use(command.key)
                else:
                    reply, actions = core.on_command(command, now=now, wall_ns=time.time_ns())
                    self._carry_out(actions)
                    if isinstance(command, Purge) and not reply.get("deferred"):
                        self._admin.report(command.command_id, reply)
        if self._source in ready:
            self._drain_source()
            # Heartbeats that arrived while we converted must count before
            # the election timer is looked at, or a busy backup would
            # promote itself over a live active.
            self._drain_sync()
        self._tick()

    def _tick(self) -> None:
        now = time.monotonic()
        if now >= self._next_machine_sample:
            self._next_machine_sample = now + MACHINE_SAMPLE_S
            memory = psutil.virtual_memory().available / 2**20
            self.core.on_machine_sample(
                MachineSample(available_memory_mb=memory, cpu_percent=self._process.cpu_percent(None))
            )
            self.metrics.observe(self, now)
        wall_ns = time.time_ns()
        if self.delayed_line is not None:
            self.delayed_line.feed(self.core, wall_ns=wall_ns)
        self._carry_out(self.core.on_tick(now=now, wall_ns=wall_ns))
        self.guard.serve(LINE, self._line, now=now)
        self._rebind(now)
        if self._admin is not None:
            self._admin.view = self.core.sync_view()

    def _drain_source(self) -> None:
        core, source = self.core, self._source
        # Bounded by frames and by time, so heartbeats and sync messages are
        # never starved by a burst of source data.
        budget_end = time.monotonic() + SOURCE_BUDGET_S
        for count in range(SOURCE_BATCH_FRAMES):
            now = time.monotonic()
            if (count and now >= budget_end) or not core.reads_source(now):
                return
            try:
                parts = transport.recv_frames(source)
            except zmq.Again:
                return
            self._carry_out(core.on_source(parts, now=now, wall_ns=time.time_ns()))

    def _drain_sync(self) -> None:
        core, channel = self.core, self.config.channel_number
        now, wall_ns = time.monotonic(), time.time_ns()
        for _ in range(SYNC_MESSAGES_PER_DRAIN):
            try:
                data = self._sync_sub.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                message = decode_sync(data, channel=channel)
            except SyncDecodeError:
                core.on_sync_garbage()
                continue
            self._carry_out(core.on_sync(message, now=now, wall_ns=wall_ns))

    def _serve_control(self) -> None:
        assert self._control is not None
        if self._control_waiting:
            return  # a REP answers before it reads again: the deferred reply comes first
        request = self._control.recv()
        try:
            command: Command = decode_request(request)
        except ControlError as exc:
            reply: dict[str, Any] = {"ok": False, "error": f"bad request: {exc}"}
        else:
            if isinstance(command, Purge):
                self._commands_seen += 1
                command = dataclasses.replace(command, command_id=f"control-{self._commands_seen}")
            reply, actions = self.core.on_command(command, now=time.monotonic(), wall_ns=time.time_ns())
            if reply.get("deferred") and isinstance(command, Purge):
                self._defer_control(command.command_id)
                self._carry_out(actions)
                return
            self._carry_out(actions)
            if "role" in reply:
                reply = {**self.status(), **reply}
        self._control.send(encode_reply(reply))

    def _defer_control(self, command_id: str) -> None:
        # The reply comes with a CommandDone (the backups' acks): stop polling the REP socket
        # until then, or a waiting request would wake the loop for nothing, turn after turn.
        assert self._control is not None
        self._control_waiting = command_id
        for poller in self._all_pollers:
            poller.unregister(self._control)

    def _command_done(self, action: CommandDone) -> None:
        if action.command_id == self._control_waiting and self._control is not None:
            self._control_waiting = ""
            self._control.send(encode_reply(action.reply))
            for poller in self._all_pollers:
                poller.register(self._control, zmq.POLLIN)
        elif self._admin is not None:
            self._admin.report(action.command_id, action.reply)

    # ---- actions -------------------------------------------------------------------------

    def _carry_out(self, actions: Sequence[Action]) -> None:
        for action in actions:
            if type(action) is Publish:
                packet = self.seal.seal(action.packet) if self.seal.active else action.packet
                if packet is not None:  # None: a sealed line whose first key has not come yet
                    self.line_bytes += len(packet)
                    # Two sends with int flags: send_multipart builds the flags with
                    # IntFlag arithmetic per frame, ~2 us a packet.
                    self._line.send(self._topic, _SNDMORE)
                    self._line.send(packet)
            elif type(action) is JournalRecords:
                assert self.journal is not None
                self.journal.append(action)
            elif type(action) is SendSync:
                self._sync_pub.send(encode_sync(action.message, channel=self.config.channel_number))
            elif type(action) is WriteCheckpoint:
                assert self.journal is not None
                self.journal.checkpoint(action)
            elif type(action) is PublishDelayed:
                if self.delayed_line is not None:
                    self.delayed_line.send(action.packet)
            elif type(action) is JournalControl:
                assert self.journal is not None
                self.journal.append_control(action)
            elif type(action) is CommandDone:
                self._command_done(action)
            elif type(action) is Status:
                self._status(action.event, **action.fields)
            elif type(action) is RecordTerm and self.journal is not None:
                self.journal.record_term(action.term)
            elif type(action) is Quarantine and self._quarantine is not None:
                self._quarantine.write(
                    time_ns=time.time_ns(),
                    reason=action.reason,
                    source_seq=action.source_seq,
                    detail=action.detail,
                    data=action.data,
                    size=action.size,
                )

    def _status(self, event: str, **fields: Any) -> None:
        self._on_status({"event": event, "adapter": self.config.adapter, "time_ns": time.time_ns(), **fields})
