"""One channel's stream of ``msg_seq``: blocks from any line in, each ``msg_seq`` out once and in order.

Theory of operation
-------------------
:class:`DeliveryStream` is the half of :class:`~feedha.client.ChannelArbiter`
that orders blocks; the arbiter decides which packets to believe (headers,
garbage, terms, jumps) and hands it their blocks. Invariant: every
``msg_seq`` in ``[next, high)`` is either buffered (arrived early) or inside
exactly one hole (known missing, :mod:`feedha.client._holes`). ``high`` grows
with the packets and heartbeats seen (a heartbeat's ``first_seq`` is the
line's next ``msg_seq``, so it reveals loss at the tail of a burst).

A block is classified by where its ``msg_seq`` falls: below ``next`` it is a
copy of a delivered one (duplicate, conflict or late, checked against
:class:`~feedha.client._copies.DeliveredRing`); buffered, a copy of a
buffered one; otherwise a first copy, delivered at once if it is ``next``
(draining the buffer behind it) or buffered (filling its hole). A hole open
for ``fill_timeout`` yields one ``RetransmissionNeeded``; open for
``loss_timeout`` (or when the buffer overflows ``max_buffered``), it is
declared lost (``GapLost``), and delivery skips it and drains what was
buffered behind it -- unless a retransmission shrank it since it was asked
for: then what is left is asked for again, with ``loss_timeout`` from then
(a hole bigger than one call of the hook can fill is filled call by call,
and lost only once a call brings none of it). An undelivered copy from an older term (a zombie
active's) loses to a different copy from a newer term.

``refilled`` keeps the ``msg_seq``\\ s whose first copy came by
retransmission and that no line carried since (``line_holes``): a line
carries what a packet of it that is believed and well formed covers.
"""

from __future__ import annotations

import logging
from typing import Final

from feedha.client._copies import DeliveredRing, RecentPackets
from feedha.client._holes import Holes
from feedha.client._live_blocks import read_live_blocks
from feedha.client.arbiter_stats import LineStats
from feedha.client.events import (
    ArbiterConfig,
    ConflatedDelivery,
    Conflict,
    DelayedDelivery,
    Delivery,
    Event,
    GapLost,
    Purged,
    RetransmissionNeeded,
    SessionBoundaryDelivery,
)
from feedha.proto.wire import TOMBSTONE_STREAM, PacketHeader

logger = logging.getLogger(__name__)

__all__ = ["DeliveryStream", "LineCounters"]

REFILLED_MAX: Final = 65_536  # msg_seqs filled by retransmission that a late line copy may still clear


class LineCounters:
    """What one line brought (``LineStats`` while it counts)."""

    __slots__ = (
        *("adapter", "packets", "blocks", "heartbeats", "first_copies"),
        *("duplicates", "garbage", "stale", "last_term", "heard_at"),
    )

    def __init__(self) -> None:
        self.adapter: int | None = None
        self.last_term: int | None = None
        self.heard_at: float | None = None  # when the line last sent anything (its term's vote counts)
        self.packets = self.blocks = self.heartbeats = self.first_copies = 0
        self.duplicates = self.garbage = self.stale = 0

    def snapshot(self, line: int) -> LineStats:
        """The counters as a :class:`LineStats`."""
        return LineStats(
            line=line,
            adapter=self.adapter,
            packets=self.packets,
            blocks=self.blocks,
            heartbeats=self.heartbeats,
            first_copies=self.first_copies,
            duplicates=self.duplicates,
            garbage=self.garbage,
            stale=self.stale,
            last_term=self.last_term,
        )


class DeliveryStream:
    """The ordering state of one channel (see the module docstring).

    Args:
        config: the channel's settings.
    """

    def __init__(self, config: ArbiterConfig) -> None:
        self.channel = config.channel  # set by the arbiter when it adopts one
        self.name = config.name
        self.next: int | None = None  # next msg_seq to deliver
        self.high = 0  # every msg_seq below it is delivered, buffered, lost or in a hole
        self.buffer: dict[int, Delivery] = {}
        self.holes = Holes()
        self.refilled: dict[int, None] = {}  # insertion-ordered set
        self.refilled_overflow = 0
        self.ring = DeliveredRing(config.conflict_window)
        self.recent = RecentPackets()
        self.active_line: int | None = None
        self.boundaries = 0  # end-of-session blocks delivered (SessionBoundaryDelivery)
        self.delivered = self.duplicates = self.conflicts = self.late = self.lost = self.purged = 0
        self._config = config
        self._delayed = config.delayed
        self._delivery_type: type[Delivery] = (
            ConflatedDelivery if config.conflated else DelayedDelivery if config.delayed else Delivery
        )

    def start_at(self, first: int) -> None:
        """The first packet believed starts at ``first``: delivery starts there (or at ``start_seq``)."""
        if self.next is None:
            start = self._config.start_seq
            self.next = self.high = first if start is None else start

    def reach(self, first: int, now: float) -> None:
        """A packet or heartbeat says ``first`` exists: whatever between ``high`` and it is missing."""
        self.start_at(first)
        if first > self.high:
            self.holes.open(self.high, first - 1, now)
            logger.debug("channel %s: gap %d..%d", self.channel, self.high, first - 1)
            self.high = first

    def line_carried(self, first: int, count: int) -> None:
        """A line carried ``first..first+count-1``: they are no line's holes any more."""
        refilled = self.refilled
        for seq in range(first, first + count):
            refilled.pop(seq, None)

    # -- the fast path ---------------------------------------------------------------

    def take_live(
        self,
        line: int,
        counters: LineCounters,
        packet: bytes,
        first: int,
        count: int,
        term: int,
        send_time_ns: int,
    ) -> list[Event] | None:
        """Take a live packet of the current term; ``None`` (nothing changed) when the general path must.

        It applies when every block is either below the delivery point (a copy)
        or, with nothing buffered and no hole open, the next ones to deliver.
        """
        next_seq = self.next
        if next_seq is None or first > next_seq:
            return None
        last = first + count
        if last > next_seq and (self.buffer or self.holes):
            return None
        if self.recent.is_copy(first, packet):
            self.duplicates += count
            counters.duplicates += count
            counters.blocks += count
            return []
        below = count if last <= next_seq else next_seq - first
        stamp = (self._delivery_type, self.channel, line, term, send_time_ns)
        read = read_live_blocks(packet, next_seq, first, count, below, stamp)
        if read is None:
            return None
        streams, source_seqs, deliveries = read
        counters.blocks += count
        out: list[Event] = []
        if below:
            self._check_copies(line, first, streams[:below], source_seqs[:below], counters, out)
        if deliveries:
            delivered = count - below
            self.ring.remember_run(next_seq, streams[below:], source_seqs[below:])
            self.delivered += delivered
            self.next = last
            if last > self.high:
                self.high = last
            counters.first_copies += delivered
            self.active_line = line
            out += deliveries
            if not below:
                self.recent.remember(first, packet)
        return out

    def _check_copies(
        self,
        line: int,
        first: int,
        streams: list[int],
        source_seqs: list[int],
        counters: LineCounters,
        out: list[Event],
    ) -> None:
        # Copies of delivered msg_seq first..: usually all duplicates, which the ring shows at C speed.
        if self.ring.holds_run(first, streams, source_seqs):
            self.duplicates += len(streams)
            counters.duplicates += len(streams)
            return
        for seq, stream, source_seq in zip(
            range(first, first + len(streams)), streams, source_seqs, strict=True
        ):
            self._check_copy(seq, stream, source_seq, line, counters, out)

    def _check_copy(
        self, seq: int, stream: int, source_seq: int, line: int, counters: LineCounters, out: list[Event]
    ) -> None:
        # A copy of a delivered msg_seq: the same identity, another one, or no longer known.
        kept = self.ring.identity(seq)
        if kept is None:
            self.late += 1
        elif kept == (stream, source_seq):
            self.duplicates += 1
            counters.duplicates += 1
        else:
            self._conflict(seq, line, kept, (stream, source_seq), out)

    # -- the general path -------------------------------------------------------------

    def take_blocks(
        self,
        line: int,
        header: PacketHeader,
        packet: bytes,
        blocks: list[tuple[int, int, int, int]],
        counters: LineCounters,
        now: float,
        out: list[Event],
    ) -> None:
        """Take a believed packet's decoded blocks (``(stream, source_seq, start, end)`` each), one by one."""
        first, channel = header.first_seq, self.channel
        assert channel is not None  # adopted before any block is taken
        self.reach(first, now)
        replaced = self._supersede(line, header, packet, blocks, out) if self.buffer else ()
        refill = header.is_retransmission
        if self.refilled and not refill:
            self.line_carried(first, len(blocks))
        before = counters.first_copies
        kind = SessionBoundaryDelivery if header.is_end_of_session else self._delivery_type
        for index, (stream, source_seq, start, end) in enumerate(blocks):
            seq = first + index
            if replaced and seq in replaced:
                continue
            assert self.next is not None
            if seq < self.next:
                self._check_copy(seq, stream, source_seq, line, counters, out)
                continue
            pending = self.buffer.get(seq)
            if pending is not None:
                kept = (pending.source_stream, pending.source_seq)
                if kept == (stream, source_seq):
                    self.duplicates += 1
                    counters.duplicates += 1
                else:
                    self._conflict(seq, line, kept, (stream, source_seq), out)
                continue
            term, sent = header.term, header.send_time_ns
            self._accept(
                kind(channel, seq, stream, source_seq, line, term, sent, packet, start, end),
                counters,
                out,
                refill=refill,
            )
            if refill:
                self._refilled_by_retransmission(seq)
        if counters.first_copies - before == len(blocks):
            self.recent.remember(first, packet)

    def _refilled_by_retransmission(self, seq: int) -> None:
        # The first copy of `seq` came by retransmission: no line carried it (yet).
        if len(self.refilled) >= REFILLED_MAX:
            self.refilled_overflow += 1
        else:
            self.refilled[seq] = None

    def _accept(
        self, delivery: Delivery, counters: LineCounters, out: list[Event], *, refill: bool = False
    ) -> None:
        # The first copy of a msg_seq at or above the delivery point: delivered, or buffered.
        seq = delivery.msg_seq
        if seq >= self.high:
            self.high = seq + 1
        else:
            self.holes.fill(seq, retransmitted=refill)
        counters.first_copies += 1
        self.active_line = delivery.line
        if seq == self.next:
            self._deliver(delivery, out)
            if self.buffer:
                self._drain(out)
        else:
            self.buffer[seq] = delivery
            while len(self.buffer) > self._config.max_buffered:
                self._declare_lost(out)

    def _supersede(
        self,
        line: int,
        header: PacketHeader,
        packet: bytes,
        blocks: list[tuple[int, int, int, int]],
        out: list[Event],
    ) -> set[int]:
        # An undelivered copy from an older term loses to a different copy from a newer
        # term. Done before the main pass: filling a hole there would deliver the old copy.
        replaced: set[int] = set()
        channel = self.channel
        if header.is_retransmission or channel is None:
            return replaced
        kind = SessionBoundaryDelivery if header.is_end_of_session else self._delivery_type
        for index, (stream, source_seq, start, end) in enumerate(blocks):
            seq = header.first_seq + index
            pending = self.buffer.get(seq)
            if pending is None or pending.term >= header.term:
                continue
            rejected = (pending.source_stream, pending.source_seq)
            if rejected != (stream, source_seq):
                term, sent = header.term, header.send_time_ns
                self.buffer[seq] = kind(
                    channel, seq, stream, source_seq, line, term, sent, packet, start, end
                )
                self._conflict(seq, line, (stream, source_seq), rejected, out)
                replaced.add(seq)
        return replaced

    def _conflict(
        self, seq: int, line: int, kept: tuple[int, int], rejected: tuple[int, int], out: list[Event]
    ) -> None:
        assert self.channel is not None
        self.conflicts += 1
        logger.warning(
            "channel %s: conflict at msg_seq %d on line %d: kept %s, rejected %s",
            *(self.channel, seq, line, kept, rejected),
        )
        out.append(Conflict(self.channel, seq, line, kept, rejected, channel_name=self.name))

    # -- delivery, loss, timers --------------------------------------------------------

    def _deliver(self, delivery: Delivery, out: list[Event]) -> None:
        # The next msg_seq goes out: a message to the application, a tombstone as Purged.
        seq = delivery.msg_seq
        self.ring.remember(seq, delivery.source_stream, delivery.source_seq)
        self.next = seq + 1
        if type(delivery) is SessionBoundaryDelivery:
            self.boundaries += 1
        if delivery.source_stream != TOMBSTONE_STREAM:
            self.delivered += 1
            out.append(delivery)
            return
        self.purged += 1
        assert self.channel is not None
        purged = Purged.from_tombstone(
            self.channel, seq, delivery.payload, delayed=self._delayed, channel_name=self.name
        )
        out.append(purged)

    def _drain(self, out: list[Event]) -> None:
        buffer = self.buffer
        while self.next in buffer:
            self._deliver(buffer.pop(self.next), out)

    def _declare_lost(self, out: list[Event]) -> None:
        assert self.channel is not None
        hole = self.holes.pop_front()
        assert hole.first == self.next, (hole.first, self.next)
        self.lost += hole.last - hole.first + 1
        logger.warning("channel %s: lost msg_seq %d..%d", self.channel, hole.first, hole.last)
        out.append(GapLost(self.channel, hole.first, hole.last, channel_name=self.name))
        self.next = hole.last + 1
        self._drain(out)

    def expire(self, now: float, out: list[Event]) -> list[Event]:
        """Declare lost the holes open for ``loss_timeout``, ask for those open for ``fill_timeout``."""
        holes = self.holes
        if not holes:
            return out
        while holes.is_front_due(now, self._config.loss_timeout):
            again = holes.retry_front(now)
            if again is None:
                self._declare_lost(out)
                continue
            assert self.channel is not None
            out.append(
                RetransmissionNeeded(
                    self.channel, again.first, again.last, channel_name=self.name, delayed=self._delayed
                )
            )
        for hole in holes.due_requests(now, self._config.fill_timeout):
            assert self.channel is not None
            out.append(
                RetransmissionNeeded(
                    self.channel, hole.first, hole.last, channel_name=self.name, delayed=self._delayed
                )
            )
        return out

    def next_deadline(self) -> float | None:
        """When :meth:`expire` next has something to do."""
        return self.holes.next_deadline(self._config.fill_timeout, self._config.loss_timeout)
