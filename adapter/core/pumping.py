"""The source pump's part of the core: when it may run, and what it did.

Theory of operation
-------------------
An active adapter whose output goes straight out spends most of its time
on one kind of turn: a source frame arrives, the conversion engine takes
it whole in one run, the blocks fill a packet, the packet goes out. In the
Python loop that turn costs a poll, a receive, the core's stages (pipeline,
emitter, gate, output, sequencer) and a send: ~30 µs of interpreter a frame
at one frame a turn, ten times a bare relay's. The *pump* is that turn in
C (``adapter/_pump.c``): it waits on the sockets, receives, calls the
engine's run function, builds and sends the packets itself, and comes back
to Python only when the core has something to decide.

The core stays the one that decides:

* :func:`plan` says whether the pump may run now and within what: only in
  the plain state (the active, its gate open and trusted, nothing watched
  at a source position -- no pending report, snapshot, fence, held jump,
  deferred frame or gap -- no throttle, no conflation, no injected drop, an
  empty packet) and only until the core's next deadline. Everything the
  pump would have to decide ends its run instead.
* the pump stops at the first thing it does not take whole (a message the
  run stops at, a frame that is not two parts), at a readable sync bus or
  control socket, at the deadline, after a budget of frames, or at a
  signal; the unfinished frame goes through the Python path from where the
  pump left it (:meth:`AdapterCore.on_source`'s ``start``).
* :func:`settle` books what it did exactly as the Python path books it:
  the sequencer's run and digests, the ring's frames, the counters, the
  emitter's published position and the output's last send (the idle-line
  heartbeat), in one call per pump run.

The pump journals before it sends: for every run with blocks it calls back
into :func:`journal_records` (the journal plan's bookkeeping) and the
runner's journal writer, so the journal holds what the line carried, as on
the Python path.

:func:`pump_frames` is the pump's loop in Python over frames already
received: the reference the C pump is compared with, and what the group
harness of the tests runs where the runner would run the pump. Pure: no
socket, no clock.
"""

from __future__ import annotations

import enum
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from feedha.adapter.conversion.engine import RunFunction, Stop
from feedha.adapter.core.actions import JournalRecords
from feedha.adapter.core.sync_types import Role
from feedha.proto import wire

if TYPE_CHECKING:
    from feedha.adapter.core.machine import AdapterCore

__all__ = ["PumpPlan", "PumpStop", "Pumped", "journal_records", "plan", "pump_frames", "settle"]


class PumpStop(enum.IntEnum):
    """Why a pump run came back (``scripts/gen_constants.py`` makes these ``_pump``'s ``PUMP_*``)."""

    DEADLINE = 0  # the core's next deadline came: its timers are due
    SOCKET = 1  # the sync bus or the control socket has something to read
    FRAME = 2  # a source message the pump did not take whole: the Python path goes on from it
    BUDGET = 3  # frames kept coming: the rest of a turn runs before the pump goes on
    SIGNAL = 4  # a signal interrupted the wait (its Python handler has run)
    ERROR = 5  # something failed (``error``): what was done is booked first, then it is raised


@dataclass(frozen=True, slots=True)
class PumpPlan:
    """What one pump run may do.

    Attributes:
        deadline: when it must come back (the core's next deadline, monotonic seconds).
        expect_seq: the source_seq the next message must carry (0: any, the first ever).
        next_msg_seq: the msg_seq its first message takes.
        term: the term stamped on its packets.
        journal: it journals what it publishes (the adapter has a journal).
    """

    deadline: float
    expect_seq: int
    next_msg_seq: int
    term: int
    journal: bool


class Pumped(NamedTuple):
    """What a pump run did (the C call returns these fields as a plain tuple, in this order).

    Attributes:
        stop: why it came back (a :class:`PumpStop`).
        frames: the frames it converted whole, each with its message count (for the ring).
        first_source_seq: the first converted message's source_seq (0: none); the others follow by one.
        first_msg_seq: the msg_seq of that message; the others follow by one.
        messages: how many messages it converted (the leftover frame's first ones included).
        digests: the state digest after each message, native uint64s.
        packets: the packets it sent.
        bytes_sent: their bytes.
        last_send_ns: the monotonic clock at its last send, in ns (0: it sent nothing).
        leftover: the parts of the source message it stopped at (``None``: none).
        leftover_frame: the frame it converted from those parts (the engine's ``source_frame``
            of the second part; ``None``: it converted nothing of them, the Python path starts afresh).
        leftover_pos: where in that frame the Python path goes on.
        leftover_converted: how many of that frame's messages it converted (before ``leftover_pos``).
        error: what failed (with :attr:`PumpStop.ERROR`), else ``None``.
    """

    stop: int
    frames: list[tuple[bytes, int]]
    first_source_seq: int
    first_msg_seq: int
    messages: int
    digests: bytes
    packets: int
    bytes_sent: int
    last_send_ns: int
    leftover: list[bytes] | None
    leftover_frame: bytes | None
    leftover_pos: int
    leftover_converted: int
    error: BaseException | None


def plan(core: AdapterCore, now: float) -> PumpPlan | None:
    """The pump's plan for now, or ``None`` when the core must see every frame itself."""
    sync, pipeline, emitter = core.sync, core.pipeline, core.emitter
    output, gate = emitter.output, emitter.gate
    if (
        sync.role is not Role.ACTIVE
        or not gate.is_open
        or emitter.suspect_after is not None
        or output.pending
        or output.drops_injected
        or core.conflated.enabled
        or not pipeline.is_plain()
        or not core.reads_source(now)
        or core.is_throttled()
        or core.gaps.query is not None
        or core.gaps.backup.owed
    ):
        return None
    last = pipeline.sequencer.last_source_seq
    return PumpPlan(
        deadline=core.next_deadline(now),
        expect_seq=last + 1 if last else 0,
        next_msg_seq=pipeline.sequencer.next_msg_seq,
        term=sync.term,
        journal=emitter.journal is not None,
    )


def journal_records(
    core: AdapterCore, first_msg_seq: int, time_ns: int, first_source_seq: int, payloads: list[bytes]
) -> JournalRecords | None:
    """The journal records of one run the pump is about to publish (the journal plan's bookkeeping)."""
    journal = core.emitter.journal
    if journal is None:
        return None
    source_seqs = array("q", range(first_source_seq, first_source_seq + len(payloads)))
    return journal.records(first_msg_seq, time_ns, source_seqs, payloads)


def settle(core: AdapterCore, pumped: Pumped) -> None:
    """Book what a pump run did, as the Python path books the same frames and packets.

    The frame the pump stopped at is not in ``pumped.frames``: the Python path books it
    whole once it has converted the rest (``on_source``'s ``converted``).
    """
    pipeline, emitter = core.pipeline, core.emitter
    count = pumped.messages
    if count:
        pipeline.sequencer.record_run(pumped.first_source_seq, pumped.first_msg_seq, pumped.digests)
        pipeline.counters.numbered += count
        emitter.published_msg_seq = pumped.first_msg_seq + count - 1
        emitter.published += count
    ring = pipeline.ring
    for frame, converted in pumped.frames:
        ring.add(frame, converted)
    if pumped.packets:
        emitter.output.sent(pumped.packets, at=pumped.last_send_ns / 1e9)


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
    journal: Callable[[int, int, int, list[bytes]], None] | None,
    line: LineIdentity,
    wall_ns: int,
    now_ns: int,
    max_frames: int = 1 << 30,
) -> tuple[Pumped, list[bytes]]:
    """The C pump's loop over source messages already received: what it books, and its packets.

    ``messages`` are the source messages waiting, each as its parts; once they are taken
    the pump would wait (its deadline: :attr:`PumpStop.DEADLINE`). Packets go out when
    full and when the messages are drained, as the C pump sends them; every message and
    run gets ``wall_ns`` as its publish time and every packet ``wall_ns`` as its send time.
    """
    builder, packets = wire.PacketBuilder(line.max_packet_bytes), []
    frames: list[tuple[bytes, int]] = []
    expect, msg_seq, first_source, first_msg, count = plan.expect_seq, plan.next_msg_seq, 0, 0, 0
    digests = bytearray()
    want_payloads = plan.journal and journal is not None

    def seal() -> None:
        if builder.count:
            packets.append(builder.build(channel=line.channel, adapter=line.adapter, term=plan.term,
                                         send_time_ns=wall_ns))  # fmt: skip

    def result(stop: PumpStop, leftover: tuple[list[bytes], bytes | None, int, int] | None) -> Pumped:
        seal()
        parts, frame, pos, converted = leftover if leftover is not None else (None, None, 0, 0)
        return Pumped(
            stop=stop, frames=frames, first_source_seq=first_source, first_msg_seq=first_msg,
            messages=count, digests=bytes(digests), packets=len(packets),
            bytes_sent=sum(map(len, packets)), last_send_ns=now_ns if packets else 0, leftover=parts,
            leftover_frame=frame, leftover_pos=pos, leftover_converted=converted, error=None,
        )  # fmt: skip

    for taken, parts in enumerate(messages, start=1):
        if len(parts) != 2:
            return result(PumpStop.FRAME, (parts, None, 0, 0)), packets
        frame = parts[1] if frame_of is None else frame_of(parts[1])
        pos = converted = 0
        while True:
            room = builder.room()
            pos, got, stop, blocks, first_seq, run_digests, payloads = run(
                frame, pos, expect, 0, room, wire.MAX_COUNT - builder.count, wall_ns,
                line.source_stream, True, want_payloads,
            )  # fmt: skip
            if got:
                if want_payloads and journal is not None and payloads is not None:
                    journal(msg_seq, wall_ns, first_seq, payloads)
                builder.add_blocks(msg_seq, got, blocks)
                if not count:
                    first_source, first_msg = first_seq, msg_seq
                count, msg_seq, expect = count + got, msg_seq + got, first_seq + got
                digests += run_digests
                converted += got
            if stop == Stop.END and pos >= len(frame):
                break
            if stop in (Stop.ROOM, Stop.COUNT):
                seal()
                continue
            return result(PumpStop.FRAME, (parts, frame, pos, converted)), packets
        if converted:
            frames.append((frame, converted))
        if taken >= max_frames:
            return result(PumpStop.BUDGET, None), packets
    return result(PumpStop.DEADLINE, None), packets
