"""The source pump's loop in Python: the reference the C pump (``adapter/_pump.c``) is held to.

:func:`pump_frames` runs what the C pump's ``Pump.run`` does over source messages already
received, with no socket and no clock: the differential tests compare the two, and the group
harness of the tests runs it where the runner would run the C pump. It is not a production path:
the C pump is the only loop that runs the core's plan (:mod:`adapter.core.pumping`) in an adapter.

Its parts follow the C pump's, function for function: :meth:`_Twin.take_message` is
``take_message``, :meth:`_Twin.take_run` ``take_run``, :meth:`_Twin.seal` ``seal_packet``,
:meth:`_Twin.journal_packet` ``journal_packet`` (the journal plan's bookkeeping, then one append of
what the journal does not have yet), :func:`_hold_records` ``hold_records``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from feedha.adapter.conversion.engine import RunFunction, Stop
from feedha.adapter.core.output import UNBOUNDED_ROOM
from feedha.adapter.core.pipeline import UNBOUNDED_COUNT
from feedha.adapter.core.pumping import AppendBatch, HeldKind, Pumped, PumpMode, PumpPlan, PumpStop
from feedha.proto import wire

__all__ = ["LineIdentity", "pump_frames"]

# Where the Python path goes on in a source message the pump stopped at: its parts, the frame
# converted from them (None: none), the position in it and how many of its messages were converted.
_Leftover = tuple[list[bytes], bytes | None, int, int]


@dataclass(frozen=True, slots=True)
class LineIdentity:
    """What the pump stamps on its packets and blocks."""

    channel: int
    adapter: int
    source_stream: int
    max_packet_bytes: int


def pump_frames(
    plan: PumpPlan,
    messages: Iterable[list[bytes]],
    *,
    run: RunFunction,
    frame_of: Callable[[bytes], bytes] | None,
    journal: AppendBatch | None,
    line: LineIdentity,
    wall_ns: int,
    now_ns: int,
    max_frames: int = 1 << 30,
) -> tuple[Pumped, list[bytes]]:
    """The C pump's loop over source messages already received: what it books, and the packets it sent.

    ``messages`` are the source messages waiting, each as its parts; once they are taken
    the pump would wait (:attr:`PumpStop.DEADLINE`), or, when the plan says not to wait,
    come back (:attr:`PumpStop.DRAINED`). Packets are sealed when full and when
    the messages are drained, as the C pump seals them; every message and run gets
    ``wall_ns`` as its publish time and every packet ``wall_ns`` as its send time. ``SEND``
    returns the packets (the line's) and journals through ``journal`` (a writer's
    ``append_batch``: what the C pump appends to the writer's Appender); ``HOLD`` returns them
    in ``held`` with the records, as the C pump does. ``journal`` is called once a packet,
    before it goes, with the records the journal does not have (``plan.journaled_upto``); a
    packet whose records it refuses (raises) is dropped, its runs booked, and the pump comes
    back with :attr:`PumpStop.ERROR` and the rest of the frame, as the C pump does. It sends no
    heartbeat report (``plan.report``): its clock does not move, and a report that is due goes
    out from the core's next tick.
    """
    twin = _Twin(plan, run=run, journal=journal, line=line, wall_ns=wall_ns, now_ns=now_ns)
    for taken, parts in enumerate(messages, start=1):
        stopped = twin.take_message(parts, frame_of)
        if stopped is not None:
            return stopped, twin.packets
        if taken >= max_frames:
            return twin.result(PumpStop.BUDGET, None), twin.packets
    drained = PumpStop.DRAINED if plan.wait < plan.deadline else PumpStop.DEADLINE
    return twin.result(drained, None), twin.packets


class _Twin:
    """One pump run in Python: the C pump's ``Run``, field for field."""

    def __init__(
        self, plan: PumpPlan, *, run: RunFunction, journal: AppendBatch | None, line: LineIdentity,
        wall_ns: int, now_ns: int,
    ) -> None:  # fmt: skip
        self.plan, self.run, self.journal, self.line = plan, run, journal, line
        self.wall_ns, self.now_ns = wall_ns, now_ns
        self.builder, self.packets = wire.PacketBuilder(line.max_packet_bytes), list[bytes]()
        self.frames: list[tuple[bytes, int]] = []
        self.held: list[tuple[Any, ...]] | None = [] if plan.mode is PumpMode.HOLD else None
        self.expect, self.msg_seq = plan.expect_seq, plan.next_msg_seq
        self.first_source = self.first_msg = self.count = self.upto = 0
        self.digests = bytearray()
        self.converting = plan.mode is PumpMode.CONVERT
        self.want_payloads = (
            plan.journal and not self.converting and (self.held is not None or journal is not None)
        )
        # SEND: [first_msg_seq, time_ns, first_source_seq, payloads] of the packet being filled.
        self.to_journal: list[Any] | None = None
        self.journal_upto, self.journal_upto_source = plan.journaled_upto, 0
        self.journaled = self.journal_skipped = 0

    def take_message(self, parts: list[bytes], frame_of: Callable[[bytes], bytes] | None) -> Pumped | None:
        """Convert one source message whole (``None``), or stop at it (what the run did)."""
        if len(parts) != 2:
            return self.result(PumpStop.FRAME, (parts, None, 0, 0))
        frame = parts[1] if frame_of is None else frame_of(parts[1])
        pos = converted = 0
        while True:
            pos, got, stop, refused = self.take_run(frame, pos)
            converted += got
            if refused is None and stop in (Stop.ROOM, Stop.COUNT):
                refused = self.seal()
                if refused is None:
                    continue
            if refused is not None:  # the run is booked; the rest of the frame goes on in the Python path
                if pos < len(frame):
                    return self.result(PumpStop.ERROR, (parts, frame, pos, converted), refused)
                self.frames.append((frame, converted))
                return self.result(PumpStop.ERROR, None, refused)
            if stop == Stop.END and pos >= len(frame):
                break
            return self.result(PumpStop.FRAME, (parts, frame, pos, converted))
        if converted:
            self.frames.append((frame, converted))
        return None

    def take_run(self, frame: bytes, pos: int) -> tuple[int, int, int, Exception | None]:
        """One run of the engine from ``pos``, booked: where it stopped, how many, why, a refusal."""
        if self.converting:
            room, max_count = UNBOUNDED_ROOM, UNBOUNDED_COUNT
        else:
            room, max_count = self.builder.room(), wire.MAX_COUNT - self.builder.count
        pos, got, stop, blocks, first_seq, run_digests, payloads = self.run(
            frame, pos, self.expect, self.plan.stop_seq, room, max_count, self.wall_ns,
            self.line.source_stream, True, self.want_payloads,
        )  # fmt: skip
        refused: Exception | None = None
        if not got:
            return pos, got, stop, refused
        if self.want_payloads and payloads is not None:
            if self.held is not None:
                _hold_records(self.held, self.msg_seq, self.wall_ns, first_seq, payloads)
            elif self.journal is not None:
                refused = self.keep_for_journal(first_seq, payloads)
        if not self.converting and refused is None:
            self.builder.add_blocks(self.msg_seq, got, blocks)
            self.upto = first_seq + got - 1
        if not self.count:
            self.first_source, self.first_msg = first_seq, self.msg_seq
        self.count, self.msg_seq, self.expect = self.count + got, self.msg_seq + got, first_seq + got
        self.digests += run_digests
        return pos, got, stop, refused

    def journal_packet(self) -> Exception | None:
        """Journal the packet being filled before it goes; a refusal drops the packet (not its runs)."""
        kept, self.to_journal = self.to_journal, None
        if kept is None or self.journal is None:
            return None
        first, time_ns, first_source, payloads = kept
        count = len(payloads)
        skip = min(max(self.journal_upto - first + 1, 0), count)  # the journal plan's take()
        self.journal_skipped += skip
        if skip == count:
            return None
        self.journal_upto, self.journal_upto_source = first + count - 1, first_source + count - 1
        self.journaled += count - skip
        seqs = range(first_source + skip, first_source + count)
        try:
            self.journal(first + skip, time_ns, self.line.source_stream, seqs, payloads[skip:])
        except Exception as exc:  # noqa: BLE001 -- as the C pump: raised by the runner once booked
            self.builder = wire.PacketBuilder(self.line.max_packet_bytes)
            return exc
        return None

    def keep_for_journal(self, first_seq: int, payloads: list[bytes]) -> Exception | None:
        """Keep a run's records for its packet's journal append (runs that follow each other share one)."""
        kept = self.to_journal
        if kept is not None:
            kept_msg, _time, kept_source, records = kept
            if kept_msg + len(records) == self.msg_seq and kept_source + len(records) == first_seq:
                records.extend(payloads)
                kept[1] = self.wall_ns
                return None
            refused = self.journal_packet()
            if refused is not None:
                return refused
        self.to_journal = [self.msg_seq, self.wall_ns, first_seq, list(payloads)]
        return None

    def seal(self) -> Exception | None:
        """Seal the packet being filled: journal it, then send it (``SEND``) or hold it (``HOLD``)."""
        builder = self.builder
        if not builder.count:
            return None
        refused = self.journal_packet()
        if refused is not None:
            return refused
        last, size = builder.first_seq + builder.count - 1, builder.count
        packet = builder.build(channel=self.line.channel, adapter=self.line.adapter, term=self.plan.term,
                               send_time_ns=self.wall_ns)  # fmt: skip
        self.packets.append(packet)
        if self.held is not None:
            self.held.append((HeldKind.PACKET, packet, last, size, self.upto))
        return None

    def result(
        self, stop: PumpStop, leftover: _Leftover | None, error: BaseException | None = None
    ) -> Pumped:
        """What the run did, as the C pump returns it (the packet being filled sealed first)."""
        refused = self.seal()
        if refused is not None and error is None:
            stop, error = PumpStop.ERROR, refused
        parts, frame, pos, converted = leftover if leftover is not None else (None, None, 0, 0)
        packets, frames = self.packets, self.frames
        return Pumped(
            stop=stop, frames=frames, first_source_seq=self.first_source, first_msg_seq=self.first_msg,
            messages=self.count, digests=bytes(self.digests), packets=len(packets),
            bytes_sent=sum(map(len, packets)), last_send_ns=self.now_ns if packets else 0, held=self.held,
            leftover=parts, leftover_frame=frame, leftover_pos=pos, leftover_converted=converted,
            error=error, frame_messages=sum(c for _f, c in frames),
            frame_bytes=sum(len(f) for f, _c in frames),
            journaled=self.journaled, journal_skipped=self.journal_skipped,
            journal_last_msg_seq=self.journal_upto if self.journaled else 0,
            journal_last_source_seq=self.journal_upto_source,
        )  # fmt: skip


def _hold_records(
    held: list[tuple[Any, ...]], msg_seq: int, time_ns: int, first_seq: int, payloads: list[bytes]
) -> None:
    # As the C pump: runs that follow each other with no packet sealed in between share one
    # item; a packet in between starts a new one (it must follow its records, and nothing it
    # carries may wait at the gate behind records of later messages). The item takes the
    # time of its latest run: no message in it is stamped before it came.
    if held and held[-1][0] == HeldKind.RECORDS:
        _kind, last_msg, _time, last_source, kept = held[-1]
        if last_msg + len(kept) == msg_seq and last_source + len(kept) == first_seq:
            kept.extend(payloads)
            held[-1] = (HeldKind.RECORDS, last_msg, time_ns, last_source, kept)
            return
    held.append((HeldKind.RECORDS, msg_seq, time_ns, first_seq, list(payloads)))
