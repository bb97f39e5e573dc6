"""The feed adapter process: sockets and clocks around the adapter core.

Every decision is :class:`~adapter.core.AdapterCore`'s; the runner moves bytes
(CONTRIBUTING.md, "Pure core, thin shell").
One thread runs a blocking loop over a ``zmq.Poller`` (measured faster than
asyncio for the per-message path; with all state on one thread nothing needs
a lock). Each turn it polls the sockets the core reads now until the core's
next deadline, hands the core what arrived -- sync-bus messages, control
requests, the admin server's commands, source frames (bounded per turn) --
calls :meth:`~adapter.core.AdapterCore.on_tick`, and after every call carries
out the returned actions, each by its type (:meth:`AdapterRunner._action_handlers`).
Other threads read only the frozen values the loop hands over
(:meth:`~adapter.core.AdapterCore.view`, :meth:`~adapter.core.AdapterCore.sync_view`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Final

import psutil
import zmq

from feedha.adapter.admin_link import AdminLink
from feedha.adapter.config import (
    CONTROL_MAX_REQUEST_BYTES,
    AdapterConfig,
)
from feedha.adapter.conflated_line import ConflatedLineSocket
from feedha.adapter.core import AdapterCore
from feedha.adapter.core import actions as act
from feedha.adapter.core.commands import encode_reply
from feedha.adapter.core.health import MachineSample
from feedha.adapter.core.syncbus import SnapshotRequest, StreamState
from feedha.adapter.delayed_line import DelayedLineSocket
from feedha.adapter.formats.registry import engine_for_format
from feedha.adapter.journal.quarantine import QuarantineFile
from feedha.adapter.line import LineSocket
from feedha.adapter.metrics import AdapterMetrics
from feedha.adapter.persistence import JournalKeeper
from feedha.adapter.source_link import SourceLink
from feedha.adapter.source_pump import SourcePump, make_pump, native_send
from feedha.adapter.sync_link import SyncLink
from feedha.adapter.zap import DataPlaneGuard
from feedha.runtime import settle_heap

logger = logging.getLogger(__name__)

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
        engine = engine_for_format(
            config.input_format,
            config.converter_table,
            book_depth=config.book_depth,
            securities=config.securities,
            max_orders=config.max_orders,
            table_budget=config.table_budget,
        )
        self.core = AdapterCore(config.core(), engine, now=time.monotonic())
        self.guard = DataPlaneGuard.from_config(config)
        self.journal = None if config.journal_dir is None else JournalKeeper(config, self.guard)
        self._quarantine: QuarantineFile | None = None
        self._control: zmq.Socket[bytes] | None = None
        self._admin: AdminLink | None = None
        self._cpu_mark = (time.monotonic(), time.process_time())  # for this process's CPU share
        self.line = LineSocket(config, self.guard)
        self.delayed_line: DelayedLineSocket | None = None
        self.conflated_line: ConflatedLineSocket | None = None
        if config.conflate_line_endpoint is not None:
            self.conflated_line = ConflatedLineSocket(config, self.guard)
        self._start_access()
        self._pollers: dict[tuple[bool, bool], zmq.Poller] = {}
        self.metrics = AdapterMetrics(config)
        self.sync_link = SyncLink(config, self.guard)
        self.source = SourceLink(config, self.guard)
        self._handlers: dict[type, Callable[[Any], None]] = {}
        self._pump: SourcePump | None = None

    def __repr__(self) -> str:
        return f"<AdapterRunner [{self.core!r}]>"

    # ---- life cycle ----------------------------------------------------------------------

    def run(self, stop: threading.Event, *, settle: bool = False) -> None:
        """Bind, connect and serve until ``stop`` is set; close every socket on the way out.

        Args:
            stop: set to stop.
            settle: once started, take everything alive out of later garbage collections
                (:func:`feedha.runtime.settle_heap`): the ``feedha adapter`` process does, an
                adapter run in a thread of a bigger program leaves that program's heap alone.
        """
        cfg = self.config
        try:
            metrics = self.metrics.serve()  # first: /healthz answers while the journal recovers
            self.guard.start(zmq.Context.instance())  # ZAP before any socket binds
            if self.journal is not None:  # recovery first: the sync rules start from its position
                self._status("recovered", **self.journal.open(self.core))
            if cfg.quarantine_path is not None:
                self._quarantine = QuarantineFile(cfg.quarantine_path)
            self._open_sockets()
            self._handlers = self._action_handlers()
            self._pump, why_not = make_pump(
                self.core,
                self.line,
                (self._source, self._sync_sub, self._control),
                self.sync_link.publisher(),
                topic=cfg.channel.encode(),
                journal=None if self.journal is None else self.journal.appender,
                enabled=cfg.source_pump,
            )
            if self._pump is None and cfg.source_pump:
                logger.warning("the source pump is off, every source frame goes through the Python loop: %s",
                               why_not)  # fmt: skip
            ready = {"line": cfg.line_endpoint, "sync": cfg.sync_endpoint, "replay": cfg.replay_endpoint,
                     "conflate_line": cfg.conflate_line_endpoint, "memory_budget": cfg.memory_budget,
                     "table_budget": cfg.table_budget}  # fmt: skip
            core = self.core
            # Started: later collections walk only what comes after (feedha.runtime).
            frozen = settle_heap() if settle else 0
            self._cpu_mark = (time.monotonic(), time.process_time())  # start-up is not the loop's CPU
            self._status("ready", **ready, next_msg_seq=core.sequencer.next_msg_seq,
                         fast_path=core.engine.is_native, source_pump=why_not or True, metrics=metrics,
                         health=self.metrics.health_address, frozen_objects=frozen)  # fmt: skip
            if cfg.admin:
                public = "" if self.guard.keys is None else self.guard.keys.public.decode()
                self._admin = AdminLink(cfg, core.sync_view(), curve_public_key=public)
                self._admin.start()
            self._loop(stop)
        finally:
            self._close()

    def _close(self) -> None:
        if self._admin is not None:
            self._admin.stop()
        self._status("stopped", **self.status())
        if self._control is not None:
            self._control.close(linger=0)
        for part in self._parts():
            part.close()
        self.guard.stop()
        self.metrics.close()

    def status(self) -> dict[str, Any]:
        """The core's status with the runner's own figures."""
        served = {} if self.journal is None else self.journal.served()
        status = {"channel": self.config.channel, **self.core.status(), **served}
        status = {**status, "access": self.guard.status(), **self.line.status()}
        if self._pump is not None:
            status["source_pump"] = self._pump.status()
        if self.conflated_line is not None:
            status["conflated_line"] = self.conflated_line.status()
        return status

    def _open_sockets(self) -> None:
        cfg = self.config
        self.line.open()
        self._sync_sub = self.sync_link.open()
        self._source = self.source.open()
        if cfg.control_endpoint:
            control: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.REP)
            self._control = control
            control.linger, control.rcvhwm = 0, 100
            control.setsockopt(zmq.MAXMSGSIZE, CONTROL_MAX_REQUEST_BYTES)
            control.bind(cfg.control_endpoint)
        if cfg.delayed_line_endpoint is not None and self.journal is not None:
            self.delayed_line = DelayedLineSocket(cfg, self.guard, self.journal)
            self.delayed_line.open()
        if self.conflated_line is not None:
            self.conflated_line.open()
        send = native_send()  # the pump extension's send, which keeps the GIL (None: pyzmq's)
        for served in (self.line, self.delayed_line, self.conflated_line):
            if served is not None:
                served.send_natively(send)

    def _rebind(self, action: act.Rebind) -> None:
        # ZAP is asked at connection time only: to cut off a revoked peer, every peer reconnects.
        logger.info("binding the %s afresh: a revoked key was connected to it", action.where)
        for part in self._parts():
            if isinstance(part, LineSocket | JournalKeeper | DelayedLineSocket | ConflatedLineSocket):
                part.rebind(action.where)
        self.guard.rebound(action.where)

    def _start_access(self) -> None:
        # The core owns the access table and the lines' sealing; the guard's threads and the
        # line sockets read the views it publishes.
        guard, lines = self.guard, [line for line in (self.line, self.conflated_line) if line is not None]
        multicast = [line.where for line in lines if line.multicast]
        access = self.core.access
        guard.publish(access.start(guard.permanent, secured=guard.keys is not None, guarded=guard.enabled,
                                   multicast=multicast))  # fmt: skip
        for line in lines:
            line.use_seal(access.seal)

    def _access_events(self) -> None:
        # What the ZAP thread and the peer books saw, for the core that owns the access table.
        admitted, blind, lost = self.guard.events()
        if admitted or blind or lost:
            self.core.on_access_events(admitted, blind, lost, now=time.monotonic(), wall_ns=time.time_ns())

    def _parts(self) -> list[Any]:
        parts = (
            self.line,
            self.sync_link,
            self.source,
            self.journal,
            self._quarantine,
            self.delayed_line,
            self.conflated_line,
        )
        return [part for part in parts if part is not None]

    # ---- the loop ------------------------------------------------------------------------

    def _poller(self, source: bool, control: bool) -> zmq.Poller:
        # One poller per set of sockets the core reads (built once each).
        poller = self._pollers.get((source, control))
        if poller is None:
            poller = self._pollers[(source, control)] = zmq.Poller()
            for sock, wanted in ((self._sync_sub, True), (self._source, source), (self._control, control)):
                if wanted and sock is not None:
                    poller.register(sock, zmq.POLLIN)
        return poller

    def _loop(self, stop: threading.Event) -> None:
        core = self.core
        while not stop.is_set():
            try:
                if self._pump_turn():
                    continue
            except Exception:  # a bug must cost one turn of the loop, never the process
                logger.exception("internal fault in the source pump's turn")
                self._carry_out(
                    core.on_fault("the source pump", now=time.monotonic(), wall_ns=time.time_ns())
                )
            now = time.monotonic()
            poller = self._poller(core.reads_source(now), core.reads_control())
            # Rounded up: a deadline less than half a millisecond away used to round to a
            # zero timeout, and the loop went round without waiting until it came (0.57
            # extra turns per message at one frame a turn, each a poll and a tick).
            timeout_ms = max(0, math.ceil((core.next_deadline(now) - now) * 1000.0))
            ready = dict(poller.poll(timeout_ms))
            try:
                self._turn(ready)
            except Exception:  # a bug must cost one turn of the loop, never the process
                logger.exception("internal fault in the adapter loop")
                self._carry_out(
                    core.on_fault("the adapter loop", now=time.monotonic(), wall_ns=time.time_ns())
                )

    def _pump_turn(self) -> bool:
        # The source pump's turn, where the core's plan allows one: it reads the source and
        # sends the line's packets until something needs the core; then the rest of a turn
        # (sync bus, control, timers) without the source, which the pump reads next time.
        pump = self._pump
        if pump is None:
            return False
        done = pump.run(time.monotonic())
        if done is None:
            return False
        actions, error = done
        self._carry_out(actions)
        if error is not None:
            raise error  # booked first: the fault costs this turn, never a message
        self._turn(dict(self._poller(False, self.core.reads_control()).poll(0)))
        return True

    def _turn(self, ready: dict[Any, int]) -> None:
        core = self.core
        if self._sync_sub in ready:
            self._drain_sync()
        if self._control is not None and self._control in ready:
            request = self._control.recv()
            self._carry_out(core.on_control(request, now=time.monotonic(), wall_ns=time.time_ns()))
        if self._admin is not None:
            for command in self._admin.commands():
                self._carry_out(core.on_admin(command, now=time.monotonic(), wall_ns=time.time_ns()))
        self._access_events()
        if self._source in ready:
            self._drain_source()
        self._tick()

    def _tick(self) -> None:
        core, now = self.core, time.monotonic()
        wall_ns = time.time_ns()
        if self.delayed_line is not None:
            self.delayed_line.feed(core.delayed_wants, core.on_delayed_records, wall_ns=wall_ns)
        with self._kept_alive(core.keepalive_report(now)):  # a checkpoint folds the whole state
            actions = core.on_tick(now=now, wall_ns=wall_ns)
            self._carry_out(actions)
        if any(type(action) is act.WriteCheckpoint for action in actions):
            core.on_checkpoint_cost(time.monotonic() - now)
        self.line.serve(now)
        if self.conflated_line is not None:
            self.conflated_line.serve(now)
        for bound in (self.line, self.delayed_line, self.conflated_line):  # a rebind waiting for its address
            if bound is not None:
                bound.retry_bind()
        if self.journal is not None:
            self.journal.view = core.view()
        if self._admin is not None:
            self._admin.view = core.sync_view()

    def _drain_source(self) -> None:
        core, source = self.core, self.source
        for parts, now in source.frames(core.reads_source):
            self._carry_out(core.on_source(parts, now=now, wall_ns=time.time_ns()))
        if source.drained:  # nothing more to read: what is ready goes out before the timers
            self._carry_out(core.on_source_drained(now=time.monotonic(), wall_ns=time.time_ns()))

    def _drain_sync(self) -> None:
        core = self.core
        for message in self.sync_link.drain(core.on_sync_garbage):
            # Each message at the time it is read: one that came while the message before it
            # took long (a snapshot adopted, 0.5 s with a large order table) was heard then,
            # not when the drain began (the rules would count that wait as the active's silence).
            now, wall_ns = time.monotonic(), time.time_ns()
            if type(message) is SnapshotRequest:  # the active folds its whole state to answer
                with self._kept_alive(core.keepalive_report(now, snapshot_asked=True)):
                    self._carry_out(core.on_sync(message, now=now, wall_ns=wall_ns))
                continue
            self._carry_out(core.on_sync(message, now=now, wall_ns=wall_ns))

    def _kept_alive(self, report: StreamState | None) -> AbstractContextManager[None]:
        # The active's report repeated while one long turn keeps the loop from reporting
        # (AdapterCore.keepalive_report): else the backups see the active silent and elect.
        if report is None:
            return contextlib.nullcontext()
        return self.sync_link.keepalive(report, every_s=self.core.config.sync.heartbeat_interval_s)

    # ---- actions -------------------------------------------------------------------------

    def _action_handlers(self) -> dict[type, Callable[[Any], None]]:
        # Each action type to what carries it out here (parts this adapter lacks: nothing).
        journal, delayed, quarantine, guard = self.journal, self.delayed_line, self._quarantine, self.guard
        conflated = self.conflated_line

        def keep(action: act.Quarantine) -> None:
            if quarantine is not None:
                quarantine.write(time_ns=time.time_ns(), reason=action.reason, source_seq=action.source_seq,
                                 detail=action.detail, data=action.data, size=action.size)  # fmt: skip

        return {
            act.Publish: lambda action: self.line.send(action.packet),
            act.SendSync: lambda action: self.sync_link.send(action.message),
            act.JournalRecords: _ignore if journal is None else self._journal_records,
            act.WriteCheckpoint: _ignore if journal is None else journal.checkpoint,
            act.JournalControl: _ignore if journal is None else journal.append_control,
            act.RecordTerm: _ignore if journal is None else lambda action: journal.record_term(action.term),
            act.PublishDelayed: _ignore if delayed is None else lambda action: delayed.send(action.packet),
            act.PublishConflated: _ignore
            if conflated is None
            else lambda action: conflated.send(action.packet),
            act.ReplyControl: self._reply_control,
            act.ReplyAdmin: self._report_admin,
            act.ReadSync: lambda _action: self._drain_sync(),
            act.SampleMachine: self._sample_machine,
            act.Status: lambda action: self._status(action.event, **action.fields),
            act.Quarantine: keep,
            act.PublishAccess: lambda action: guard.publish(action.view),
            act.Rebind: self._rebind,
            act.PublishSeal: self._use_seal,
            act.BurnCpu: lambda action: burn_cpu(action.seconds, hold_gil=action.hold_gil),
        }

    def _journal_records(self, action: act.JournalRecords) -> None:
        # A write that fails leaves messages numbered but not journaled: they must not go out
        # on the line either (the journal holds what the line carried). The error goes on to
        # the loop, which books it as a fault; the turn's other actions are not carried out.
        assert self.journal is not None
        try:
            self.journal.append(action)
        except Exception:
            self.core.on_journal_refused(
                action.first_msg_seq, action.first_msg_seq + len(action.payloads) - 1
            )
            raise

    def _use_seal(self, action: act.PublishSeal) -> None:
        self.line.use_seal(action.view)
        if self.conflated_line is not None:
            self.conflated_line.use_seal(action.view)

    def _carry_out(self, actions: Sequence[act.Action]) -> None:
        send, handlers = self.line.send, self._handlers
        for action in actions:
            if type(action) is act.Publish:  # the hot one, first
                send(action.packet)
            else:
                handlers[type(action)](action)

    def _sample_machine(self, action: act.SampleMachine) -> None:
        core, writer = self.core, None if self.journal is None else self.journal.writer
        memory = psutil.virtual_memory().available / 2**20 if action.memory else None
        # The process's CPU as psutil's cpu_percent measures it (user + system time of all its
        # threads over the wall time since the last sample), without its /proc read (~75 µs).
        (then, cpu_then), now, cpu = self._cpu_mark, time.monotonic(), time.process_time()
        self._cpu_mark = (now, cpu)
        share = 100.0 * (cpu - cpu_then) / (now - then) if now > then else 0.0
        core.on_machine_sample(MachineSample(available_memory_mb=memory, cpu_percent=share))
        self.metrics.observe(
            now,
            status=self.status,
            sync=core.sync,
            lag=lambda: core.sync_view().lag,  # built only when metrics are served
            line_bytes=self.line.bytes_sent,
            sync_times=None if writer is None else writer.sync_times,
        )

    def _report_admin(self, action: act.ReplyAdmin) -> None:
        if self._admin is not None:
            self._admin.report(action.command_id, action.reply)

    def _reply_control(self, action: act.ReplyControl) -> None:
        assert self._control is not None
        reply = action.reply
        if "role" in reply:
            reply = {**self.status(), **reply}
        self._control.send(encode_reply(reply))

    def _status(self, event: str, **fields: Any) -> None:
        self._on_status({"event": event, "adapter": self.config.adapter, "time_ns": time.time_ns(), **fields})


BURN_WALL_FACTOR: Final = 20  # a busy turn ends after this many times its CPU in wall time at most


def burn_cpu(seconds: float, *, hold_gil: bool) -> None:
    """Keep this thread busy for ``seconds`` of its own CPU time (fault injection, ``busy``).

    ``hold_gil``: no other thread runs Python meanwhile, as during a long C call (the
    interpreter's switch interval is raised for the stretch and put back after); else the
    other threads share the interpreter as usual. A machine too loaded to give the thread its
    CPU ends the stretch after :data:`BURN_WALL_FACTOR` times ``seconds`` of wall time.
    """
    interval = sys.getswitchinterval()
    if hold_gil:
        sys.setswitchinterval(max(interval, seconds * BURN_WALL_FACTOR))
    try:
        end_cpu = time.thread_time() + seconds
        end_wall = time.monotonic() + seconds * BURN_WALL_FACTOR
        while time.thread_time() < end_cpu and time.monotonic() < end_wall:
            pass
    finally:
        sys.setswitchinterval(interval)


def _ignore(_action: Any) -> None:
    """An action for a part this adapter does not have (no journal, no delayed line)."""
