"""The runner's side of the source pump: an adapter's common turn in C, where it can run.

Theory of operation
-------------------
The pump (``adapter/_pump.c``) waits on the adapter's sockets, receives
source frames, converts them with the engine's run function and sends the
line packets itself; it comes back at the first thing the core must decide
(the core's part, :mod:`adapter.core.pumping`, says when it may run and
books what it did). This module only wires it to the runner's sockets:

* :func:`make_pump` builds one, or says why there is none -- the extension is
  not built, it found no libzmq or one other than pyzmq's, the operator turned
  it off (``--no-source-pump``) -- and the runner then goes on as before,
  every frame through the Python loop;
* :meth:`SourcePump.run` runs it once when the core's plan allows, in the
  plan's mode (an active that sends its packets itself only while the line
  takes them as they are: a line whose packets are sealed, or not bound,
  takes them from Python), and hands what it did to the core; the runner
  carries out the returned actions (a backup's released packets among them).
  An active's pump also sends its heartbeat reports on the sync bus's PUB while
  it runs, from the fixed parts the plan carries (``PumpPlan.report``): the
  core's turn then comes about every health interval, not every heartbeat.

An active's journal writer gets each packet's records just before the packet
is sent, from inside the C call and with no call into Python: the pump appends
them to the writer's live tail (:attr:`JournalWriter.appender
<adapter.journal.writer.JournalWriter.appender>`) through its C entry, skipping
what the journal holds already (the plan's ``journaled_upto``), and the core
books the counts when it settles the run; a backup's records come back with its
packets, for its gate.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Final

import zmq

from feedha.adapter.conversion.engine import ConversionEngine
from feedha.adapter.core import AdapterCore
from feedha.adapter.core.actions import Action
from feedha.adapter.core.pumping import Pumped, PumpMode, PumpStop
from feedha.adapter.core.ring import MAX_RING_BYTES
from feedha.adapter.journal.choice import IS_NATIVE_BUILT
from feedha.adapter.line import LineSocket, NativeSend
from feedha.transport.native import bound_to_pyzmq

if TYPE_CHECKING:
    from feedha.adapter.journal._reference import Appender

logger = logging.getLogger(__name__)

__all__ = ["SourcePump", "make_pump", "native_send"]

# Frames, and their bytes, one call takes at most (bounds only: under load the core's deadline
# ends a call first, at least every TICK_AT_LEAST_EVERY_S, usually every heartbeat interval;
# the frames a call converted are held until the core books them into its ring).
MAX_FRAMES_PER_CALL: Final = 100_000
MAX_BYTES_PER_CALL: Final = MAX_RING_BYTES


class SourcePump:
    """One adapter's source pump and the sockets it works on (:func:`make_pump` builds it).

    Args:
        pump_type: the C pump's type (``_pump.Pump``).
        core: the adapter core (its engine, identity and plan; it books what the pump did).
        line: the line (its raw socket while packets go out unsealed).
        sockets: the source, sync-bus and control sockets (control ``None`` when there is none).
        report_socket: the sync bus's PUB, where the active's heartbeat reports go.
        topic: the line's topic (the channel name).
        journal: the journal writer's live tail (:attr:`JournalWriter.appender
            <adapter.journal.writer.JournalWriter.appender>`), where each packet's records go
            (``None``: the adapter journals nothing).
    """

    def __init__(
        self,
        pump_type: Any,
        core: AdapterCore,
        line: LineSocket,
        sockets: tuple[zmq.Socket[bytes], zmq.Socket[bytes], zmq.Socket[bytes] | None],
        report_socket: zmq.Socket[bytes],
        *,
        topic: bytes,
        journal: Appender | None,
    ) -> None:
        engine, config = core.engine, core.config
        # A FIX frame is its messages; itch50 cuts a MoldUDP64 packet into its records first.
        frame_of = None if type(engine).source_frame is ConversionEngine.source_frame else engine.source_frame
        self._pump = pump_type(
            engine.run_function(),
            frame_of,
            journal,
            topic,
            config.channel_number,
            config.adapter,
            config.source_stream_number,
            config.max_packet_bytes,
        )
        self._core = core
        self._line = line
        self._append = journal
        source, sync, control = sockets
        self._source, self._sync = source.underlying, sync.underlying
        self._control = 0 if control is None else control.underlying
        self._report_socket = report_socket.underlying
        self.runs = self.handed_back = self.reports = 0
        self.stops: dict[str, int] = {stop.name.lower(): 0 for stop in PumpStop}

    def __repr__(self) -> str:
        return f"<SourcePump [runs={self.runs}, handed_back={self.handed_back}]>"

    def run(self, now: float) -> tuple[list[Action], BaseException | None] | None:
        """Run the pump once if the core and the line allow (``None``: it did not run).

        Returns:
            The core's actions once it booked what the pump did, and what failed inside the
            pump (a socket error, the journal's; ``None``: nothing), for the runner to carry
            out and then raise.
        """
        plan = self._core.pump_plan(now)
        if plan is None:
            return None
        line = 0
        if plan.mode is PumpMode.SEND:  # it sends on the line itself: only as the packets are
            socket = self._line.raw_socket()
            if socket is None:
                return None
            line = socket.underlying
        report = plan.report
        raw = self._pump.run(
            self._source,
            self._sync,
            self._control,
            line,
            round(plan.deadline * 1e9),
            round(plan.wait * 1e9),
            plan.expect_seq,
            plan.stop_seq,
            plan.next_msg_seq,
            plan.term,
            int(plan.mode),
            plan.journal and self._append is not None,
            MAX_FRAMES_PER_CALL,
            MAX_BYTES_PER_CALL,
            round(plan.batch * 1e9),
            None
            if report is None
            else (
                self._report_socket,
                round(report.due * 1e9),
                round(report.every * 1e9),
                *report.parts,
                report.next_source_seq,
                report.last_source_seq,
                report.last_msg_seq,
                report.digest,
            ),
            plan.journaled_upto,
        )
        pumped = Pumped._make(raw)
        self.runs += 1
        self.reports += pumped.reports
        self.stops[PumpStop(pumped.stop).name.lower()] += 1
        self.handed_back += pumped.leftover is not None
        if plan.mode is PumpMode.SEND:
            self._line.sent_by_others(pumped.bytes_sent)
        actions = self._core.on_pumped(pumped, plan.mode, now=time.monotonic(), wall_ns=time.time_ns())
        return actions, pumped.error

    def status(self) -> dict[str, Any]:
        """The pump's counters, for the adapter's status."""
        return {
            "runs": self.runs,
            "handed_back": self.handed_back,
            "reports": self.reports,
            "stops": dict(self.stops),
        }


def make_pump(
    core: AdapterCore,
    line: LineSocket,
    sockets: tuple[zmq.Socket[bytes], zmq.Socket[bytes], zmq.Socket[bytes] | None],
    report_socket: zmq.Socket[bytes],
    *,
    topic: bytes,
    journal: Appender | None,
    enabled: bool = True,
) -> tuple[SourcePump | None, str]:
    """The adapter's source pump, or ``None`` and why there is none.

    Args:
        core: the adapter core.
        line: the line the pump sends on.
        sockets: the source, sync-bus and control sockets.
        report_socket: the sync bus's PUB (the active's heartbeat reports).
        topic: the line's topic (the channel name).
        journal: the journal writer's live tail (``None``: the adapter journals nothing).
        enabled: the operator's choice (``--no-source-pump``).
    """
    if not enabled:
        return None, "turned off (--no-source-pump)"
    _pump, why_not = bound_to_pyzmq("feedha.adapter._pump")
    if _pump is None:
        return None, why_not
    if journal is not None and not IS_NATIVE_BUILT:
        return None, "the journal's C extension (adapter.journal._native) is not built"
    return SourcePump(_pump.Pump, core, line, sockets, report_socket, topic=topic, journal=journal), ""


def native_send() -> NativeSend | None:
    """The pump extension's ``send_packet`` (a line send that keeps the GIL), or ``None`` where
    the extension cannot run (the lines then send with pyzmq)."""
    _pump, _why_not = bound_to_pyzmq("feedha.adapter._pump")
    return None if _pump is None else _pump.send_packet
