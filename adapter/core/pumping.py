"""The source pump's part of the core: when it may run, in which mode, and what it did.

Theory of operation
-------------------
Most of an adapter's turns are one kind: a source frame arrives, the
conversion engine takes it whole in one run, the blocks fill a packet, the
packet goes out (the active) or waits at the output gate (a backup). In the
Python loop that turn costs a poll, a receive, the core's stages (pipeline,
emitter, gate, output, sequencer) and a send: ~30 µs of interpreter a frame at
one frame a turn, several times a bare relay's. The *pump* is that turn in C
(``adapter/_pump.c``): it drains the source, calls the engine's run function,
builds the packets itself, and comes back to Python only when the core has
something to decide.

The core stays the one that decides:

* :func:`plan` says whether the pump may run now, in which :class:`PumpMode`,
  before which source position and until when: the active sends its packets
  itself (``SEND``, until the core's next deadline); a backup that publishes
  gets its packets and journal records back for its output gate (``HOLD``),
  one that does not publish only converts and numbers (``CONVERT``). A backup
  whose output waits at its gate reads its source in batches
  (:data:`~adapter.core.source_side.BACKUP_READ_INTERVAL_S` apart) inside the call,
  until the active's next report or its deadline: nothing it holds could go out
  before that report, so a Python turn per batch bought nothing (a backup whose
  output passes drains what is queued and comes back at once). Never while the
  pipeline watches every message (a held jump), holds input (a deferred frame,
  a gap the group is asked about, a session roll),
  while a throttle paces it, while gap answers are owed, while its own packet
  is being filled, while drops or busy conversion turns are injected
  (:mod:`adapter.core.busy`), or with a conflated line. A position the sync
  rules watch (a pending report, snapshot or fence) is the run's
  ``stop_seq``: the pump stops there and the careful path takes it --
  except a pending report the run numbers as the active did, which the pump
  converts and stops right after (:meth:`~adapter.core.sequencer.Sequencer.pending_stop`);
  :func:`settle` hands its check to the core.
* an active's plan carries its heartbeat reports (:class:`PumpReport`, from
  :meth:`~adapter.core.machine.AdapterCore.pump_report`): the pump sends each as it
  comes due, and the plan's deadline leaves the heartbeat out; :meth:`AdapterCore.on_pumped`
  books the last one sent as the sync rules' heartbeat (``HeartbeatSent``).
* the pump stops at the first thing it does not take whole (a message the run
  stops at, a frame that is not two parts), at a readable sync bus or control
  socket (looked at before every frame), at the deadline, after a budget of
  frames or bytes, or at a signal; the unfinished frame goes through the Python
  path from where the pump left it (:meth:`AdapterCore.on_source`'s ``start``).
* :func:`settle` books what it did exactly as the Python path books it: the
  sequencer's run and digests, the ring's frames, the counters, and per mode
  the emitter's published position and the output's last send (``SEND``) or
  every held record and packet through the gate, in order (``HOLD``: a packet
  and the records of the messages it carries, which the pump hands back one
  right after the other, pass it as one item).

In ``SEND`` the pump journals before it sends, with no call into Python: for
every packet it appends the records of all the runs in it to the journal
writer's live tail (``adapter/journal/_native.c``'s ``Appender``, through its C
entry; the writer's Python runs only where it has something to decide), just
before the packet goes out, so the journal holds what the line carried, as on
the Python path; in ``HOLD`` the records come back with the packets. The
journal plan's bookkeeping (:meth:`~adapter.core.journaling.JournalPlan.take`:
a msg_seq the journal holds already is not journaled again) runs in the pump
from the plan's :attr:`PumpPlan.journaled_upto`, and :func:`settle` books its
counts (:meth:`~adapter.core.journaling.JournalPlan.took`). A packet whose
records the writer refuses (it raises) is dropped, but its runs have been
applied to the conversion state already, so they are booked all the same,
numbered but kept off the line, as the Python path numbers what its journal
fails to write; the pump stops there (:attr:`PumpStop.ERROR`) and hands back the
rest of the frame, and the runner raises the error once the core has booked
both. The active's line skips those numbers, which the backups' lines carry.

:func:`~adapter.core.pump_reference.pump_frames` is the pump's loop in Python
over frames already received: the reference the C pump is compared with, and
what the group harness of the tests runs where the runner would run the pump.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from feedha.adapter.core.actions import Action
from feedha.adapter.core.sequencer import ArrivalCheck
from feedha.adapter.core.sync_types import Role
from feedha.adapter.core.syncbus import ReportParts

if TYPE_CHECKING:
    from feedha.adapter.core.emitter import LineEmitter
    from feedha.adapter.core.pump_face import PumpingCore as AdapterCore

__all__ = [
    "AppendBatch",
    "HeldKind",
    "PumpMode",
    "PumpPlan",
    "PumpReport",
    "PumpStop",
    "Pumped",
    "admit_held",
    "plan",
    "settle",
]


AppendBatch: TypeAlias = Callable[[int, int, int, Sequence[int], Sequence[bytes]], None]
"""A journal writer's ``append_batch(first_msg_seq, time_ns, source_stream, source_seqs, payloads)``."""


class PumpStop(enum.IntEnum):
    """Why a pump run came back (``scripts/gen_constants.py`` makes these ``_pump``'s ``PUMP_*``)."""

    DEADLINE = 0  # the core's deadline came: its timers are due
    SOCKET = 1  # the sync bus or the control socket has something to read
    FRAME = 2  # a source message the pump did not take whole: the Python path goes on from it
    BUDGET = 3  # frames kept coming: the rest of a turn runs before the pump goes on
    SIGNAL = 4  # a signal interrupted the wait (its Python handler has run)
    ERROR = 5  # something failed (``error``): what was done is booked first, then it is raised
    DRAINED = 6  # nothing more was queued and it was not to wait (a backup whose output passes)


class PumpMode(enum.IntEnum):
    """What the pump does with the packets it fills (``_pump``'s ``PUMP_MODE_*``)."""

    SEND = 0  # the active: each packet goes out on the line (runs journaled first)
    HOLD = 1  # a publishing backup: packets and journal records come back for the output gate
    CONVERT = 2  # a backup that does not publish: conversion and numbering only


class HeldKind(enum.IntEnum):
    """What one item a ``HOLD`` run hands back is (``_pump``'s ``HELD_*``)."""

    RECORDS = 0  # (RECORDS, first_msg_seq, time_ns, first_source_seq, payloads): a run to journal
    PACKET = 1  # (PACKET, packet, last_msg_seq, count, last_source_seq): a sealed packet


@dataclass(frozen=True, slots=True)
class PumpPlan:
    """What one pump run may do.

    Attributes:
        mode: what becomes of the packets (:class:`PumpMode`).
        deadline: when it must come back at the latest (the core's next deadline, monotonic seconds).
        wait: until when it waits for more once it drained what was queued (the deadline; a
            backup whose output passes its gate at once: now, it drains and comes back).
        batch: how long it leaves the source alone after each drain, in seconds (0: not at all;
            a backup whose output waits at its gate reads its source in batches).
        expect_seq: the source_seq the next message must carry (0: any, the first ever).
        stop_seq: the first source position the sync rules watch (0: none): runs stop before it.
        next_msg_seq: the msg_seq its first message takes.
        term: the term stamped on its packets.
        journal: it journals what it publishes (the adapter has a journal).
        journaled_upto: the last msg_seq the journal holds (the journal plan's): what the run
            numbers up to it again (rule 2 renumbered backwards) is not journaled again.
        report: the active's heartbeat reports, which it sends itself while it runs (``None``:
            the core's turn sends them; ``deadline`` then counts the heartbeat).
    """

    mode: PumpMode
    deadline: float
    wait: float
    expect_seq: int
    stop_seq: int
    next_msg_seq: int
    term: int
    journal: bool
    batch: float = 0.0
    report: PumpReport | None = None
    journaled_upto: int = 0


@dataclass(frozen=True, slots=True)
class PumpReport:
    """The active's heartbeat reports for the pump to send (``adapter/_pump.c``, "the heartbeat report").

    Attributes:
        due: when the next is due (the sync rules' next heartbeat, monotonic seconds).
        every: the heartbeat interval, in seconds: the one after a report is due that much later.
        parts: the report's fixed parts (:func:`~adapter.core.syncbus.report_parts`).
        next_source_seq: the positions the report gives before the run numbers anything:
            the sequencer's ``next_source_seq``, ``last_recorded_source_seq``, ``last_msg_seq``
            and ``last_digest`` (what the run numbers moves them, as it moves the sequencer).
        last_source_seq: see ``next_source_seq``.
        last_msg_seq: see ``next_source_seq``.
        digest: see ``next_source_seq``.
    """

    due: float
    every: float
    parts: ReportParts
    next_source_seq: int
    last_source_seq: int
    last_msg_seq: int
    digest: int


class Pumped(NamedTuple):
    """What a pump run did (the C call returns these fields as a plain tuple, in this order).

    Attributes:
        stop: why it came back (a :class:`PumpStop`).
        frames: the frames it converted whole, each with its message count (for the ring).
        first_source_seq: the first converted message's source_seq (0: none); the others follow by one.
        first_msg_seq: the msg_seq of that message; the others follow by one.
        messages: how many messages it converted (the leftover frame's first ones included).
        digests: the state digest after each message, native uint64s.
        packets: the packets it sealed (sent, or held).
        bytes_sent: their bytes.
        last_send_ns: the monotonic clock when it sealed the last, in ns (0: none).
        held: ``HOLD``: the journal records and packets for the gate, in order (:class:`HeldKind`);
            else ``None``.
        leftover: the parts of the source message it stopped at (``None``: none).
        leftover_frame: the frame it converted from those parts (the engine's ``source_frame``
            of the second part; ``None``: it converted nothing of them, the Python path starts afresh).
        leftover_pos: where in that frame the Python path goes on.
        leftover_converted: how many of that frame's messages it converted (before ``leftover_pos``).
        error: what failed (with :attr:`PumpStop.ERROR`), else ``None``.
        frame_messages: the messages converted from ``frames`` (their counts' sum).
        frame_bytes: the bytes of ``frames``.
        reports: the heartbeat reports it sent (:attr:`PumpPlan.report`).
        last_report_ns: the monotonic clock when it sent the last, in ns (0: none).
        journaled: ``SEND``: the records it journaled (written, or refused by the writer).
        journal_skipped: the records it did not journal: the journal held their msg_seqs.
        journal_last_msg_seq: the msg_seq of the last it journaled (0: none).
        journal_last_source_seq: its source_seq.
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
    held: list[tuple[Any, ...]] | None
    leftover: list[bytes] | None
    leftover_frame: bytes | None
    leftover_pos: int
    leftover_converted: int
    error: BaseException | None
    frame_messages: int
    frame_bytes: int
    reports: int = 0
    last_report_ns: int = 0
    journaled: int = 0
    journal_skipped: int = 0
    journal_last_msg_seq: int = 0
    journal_last_source_seq: int = 0


def plan(core: AdapterCore, now: float) -> PumpPlan | None:
    """The pump's plan for now, or ``None`` when the core must see every frame itself."""
    sync, pipeline, emitter = core.sync, core.pipeline, core.emitter
    output = emitter.output
    stop_seq = pipeline.pump_stop()
    if (
        stop_seq is None
        or output.pending
        or output.drops_injected
        or core.busy.blocks_pump
        or core.conflated.enabled
        or not core.reads_source(now)
        or core.is_throttled()
        or core.gaps.query is not None
        or core.gaps.backup.owed
    ):
        return None
    sends = sync.role is Role.ACTIVE and emitter.gate.is_open
    report = core.pump_report() if sends else None
    # A pump that sends the heartbeat itself leaves it out: the core's turn waits for its other timers.
    deadline, batch = core.next_deadline(now, heartbeat=report is None), 0.0
    if sends:
        mode, wait = PumpMode.SEND, deadline
    elif sync.role is Role.BACKUP:
        mode = PumpMode.HOLD if sync.is_publishing else PumpMode.CONVERT
        batch = core.source_batch()
        wait = deadline if batch else now
    else:
        return None
    last, journal = pipeline.sequencer.last_source_seq, emitter.journal
    return PumpPlan(
        mode=mode,
        deadline=deadline,
        wait=wait,
        expect_seq=last + 1 if last else 0,
        stop_seq=stop_seq,
        next_msg_seq=pipeline.sequencer.next_msg_seq,
        term=sync.term,
        journal=journal is not None,
        batch=batch,
        report=report,
        journaled_upto=0 if journal is None else journal.last_msg_seq,
    )


def settle(
    core: AdapterCore, pumped: Pumped, mode: PumpMode
) -> tuple[list[Action], list[tuple[int, ArrivalCheck]] | None]:
    """Book what a pump run did, as the Python path books the same frames and packets.

    The frame the pump stopped at is not in ``pumped.frames``: the Python path books it
    whole once it has converted the rest (``on_source``'s ``converted``).

    Returns:
        What the gate lets out of the records and packets a ``HOLD`` run handed back, and
        the reported positions the run reached with their checks (the sequencer's
        :meth:`~adapter.core.sequencer.Sequencer.record_run`), for the core to carry out
        before anything after them is converted.
    """
    pipeline, emitter = core.pipeline, core.emitter
    count = pumped.messages
    reached = None
    if count:
        reached = pipeline.sequencer.record_run(pumped.first_source_seq, pumped.first_msg_seq, pumped.digests)
        pipeline.counters.numbered += count
    pipeline.ring.extend(pumped.frames, pumped.frame_messages, pumped.frame_bytes)
    if pumped.packets:
        emitter.output.sent(pumped.packets, at=pumped.last_send_ns / 1e9)
    out: list[Action] = []
    journal = emitter.journal
    if (pumped.journaled or pumped.journal_skipped) and journal is not None:
        journal.took(pumped.journaled, pumped.journal_skipped, pumped.journal_last_msg_seq,
                     pumped.journal_last_source_seq)  # fmt: skip
    if mode is PumpMode.SEND and count:
        emitter.published_msg_seq = pumped.first_msg_seq + count - 1
        emitter.published += count
    elif mode is PumpMode.HOLD and pumped.held:
        out += admit_held(emitter, pumped.held)
    return out, reached


def admit_held(emitter: LineEmitter, held: list[tuple[Any, ...]]) -> list[Action]:
    """Admit what a ``HOLD`` run handed back to the emitter's gate, in order; returns what goes out.

    The pump puts each packet right after the records of the messages it carries: such a
    pair passes the gate as one item (the same position, in the same order); anything else
    goes alone.
    """
    out: list[Action] = []
    i, n = 0, len(held)
    while i < n:
        item = held[i]
        if item[0] == HeldKind.RECORDS:
            after = held[i + 1] if i + 1 < n else None
            if after is not None and after[0] == HeldKind.PACKET and after[2] == item[1] + len(item[4]) - 1:
                _kind, first_msg_seq, time_ns, first_source_seq, payloads = item
                _kind, packet, last_msg_seq, count, upto = after
                records = (first_msg_seq, time_ns, first_source_seq, payloads)
                out += emitter.admit_packet(packet, last_msg_seq, count, upto, records=records)
                i += 2
                continue
            out += emitter.admit_records(*item[1:])
        else:
            out += emitter.admit_packet(*item[1:])
        i += 1
    return out
