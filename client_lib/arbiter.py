"""Line arbitration for one channel: a pure state machine (no sockets, no clock).

Theory of operation
-------------------
A subscriber joins every line of a channel; each line carries the same
``msg_seq``-numbered stream. :class:`ChannelArbiter` is fed raw packets from
any line (``on_packet``) and the time (``now=``), and returns the events to act
on: :class:`Delivery` of each ``msg_seq`` exactly once and in order, plus
:class:`RetransmissionNeeded`, :class:`GapLost`, :class:`Conflict`,
:class:`TermChanged` and :class:`EndOfSession`. Decisions read only the packet
and block headers; protobuf is decoded lazily, and only for what is delivered.

Invariant: every ``msg_seq`` in ``[next, high)`` is either buffered (arrived
early) or inside exactly one *hole* (known missing). ``high`` grows with the
packets and heartbeats seen (a heartbeat's ``first_seq`` is the line's next
``msg_seq``, so it reveals loss at the tail of a burst). Holes are kept as
sorted ranges, so a gap of a million messages costs one record. A copy that
lands in a hole splits it; a hole keeps the time it was first seen, so holes
are sorted by seq *and* by age: only the front one can be due for loss.

A hole open for ``fill_timeout`` yields one ``RetransmissionNeeded``; open for
``loss_timeout`` (or when the reorder buffer overflows), it is declared lost
(``GapLost``), delivery skips it and drains what was buffered behind it.

Terms fence zombies: packets with a term below the highest seen are dropped
as stale. Retransmitted packets are historical copies served from a journal,
so they are exempt from the fence and do not raise the term; their content is
still checked against ``(source_stream, source_seq)`` like any copy.

An arbiter of a channel's *delayed* stream (``ArbiterConfig.delayed``) takes
only packets flagged delayed (and a real-time arbiter only the others: a
packet of the other stream is garbage, reason ``delayed``); it delivers
:class:`DelayedDelivery` values and asks for delayed ranges. On either stream a
tombstone block (a purged message) is delivered as a :class:`Purged` event in
its ``msg_seq``'s place.
"""

from __future__ import annotations

import logging
import struct
from bisect import bisect_right
from collections import deque
from typing import Final

from feedha.client._claims import MAX_JUMP, Claims
from feedha.client.events import (
    ArbiterConfig,
    ArbiterStats,
    Conflict,
    DelayedDelivery,
    Delivery,
    EndOfSession,
    Event,
    GapLost,
    LineStats,
    Purged,
    RetransmissionNeeded,
    SessionBoundaryDelivery,
    TermChanged,
)
from feedha.proto.wire import (
    BLOCK_HEADER,
    FLAG_DELAYED,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    TOMBSTONE_STREAM,
    VERSION,
    PacketHeader,
    WireError,
    decode_blocks,
    decode_header,
)

logger = logging.getLogger(__name__)

_MAX_U16: Final = 0xFFFF
_RECENT_PACKETS: Final = 4096
_REFILLED_MAX: Final = 65_536  # msg_seqs filled by retransmission that a late line copy may still clear
# The fast path reads the headers itself (proto.wire's layout, same checks).
_UNPACK_HEADER: Final = HEADER.unpack_from
_UNPACK_BLOCK: Final = BLOCK_HEADER.unpack_from
_BLOCK_OVERHEAD: Final = BLOCK_HEADER.size
_MIN_BLOCK_LENGTH: Final = _BLOCK_OVERHEAD - 2  # the length field covers stream and seq


class _LineCounters:
    __slots__ = (
        *("adapter", "packets", "blocks", "heartbeats", "first_copies"),
        *("duplicates", "garbage", "stale", "last_term"),
    )

    def __init__(self) -> None:
        self.adapter: int | None = None
        self.last_term: int | None = None
        self.packets = self.blocks = self.heartbeats = self.first_copies = 0
        self.duplicates = self.garbage = self.stale = 0

    def snapshot(self, line: int) -> LineStats:
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


class _Hole:
    """A known-missing inclusive range, with the time it was first seen."""

    __slots__ = ("first", "last", "detected_at", "requested")

    def __init__(self, first: int, last: int, detected_at: float, requested: bool = False) -> None:
        self.first = first
        self.last = last
        self.detected_at = detected_at
        self.requested = requested


def _hole_first(hole: _Hole) -> int:
    return hole.first


class ChannelArbiter:
    """Arbitrates the lines of one channel into one in-order, gap-aware stream.

    Args:
        config: the channel's settings.
        lines: how many lines to pre-register (0..lines-1) for stats; lines
            with other indices are registered when first seen.

    The arbiter never raises on what a line sends: malformed packets and
    packets for another channel are counted as garbage and dropped.
    """

    def __init__(self, config: ArbiterConfig, *, lines: int = 0) -> None:
        self._config = config
        self._channel = config.channel
        self._name = config.name
        self._fill_timeout = config.fill_timeout
        self._loss_timeout = config.loss_timeout
        self._next: int | None = None  # next msg_seq to deliver
        self._high = 0  # every msg_seq below it is delivered, buffered, lost or in a hole
        self._buffer: dict[int, Delivery] = {}
        self._holes: list[_Hole] = []
        self._window = config.conflict_window
        # Ring of recently delivered identities, indexed by msg_seq % window.
        self._ring_seq = [-1] * self._window
        self._ring_stream = [0] * self._window
        self._ring_source_seq = [0] * self._window
        # Recent all-first-copy packets by first_seq: a byte-identical copy from
        # another line is all duplicates, no block walk needed.
        self._recent: dict[int, bytes] = {}
        self._recent_order: deque[int] = deque()
        self._lines: dict[int, _LineCounters] = {line: _LineCounters() for line in range(lines)}
        self._highest_term: int | None = None
        self._claims = Claims()
        self._suspect = 0
        self._active_line: int | None = None
        self._ended = False
        self.boundaries = 0  # end-of-session blocks delivered (SessionBoundaryDelivery)
        self._delayed = config.delayed
        self._live_flags = FLAG_DELAYED if config.delayed else 0  # the flags of a live data packet
        self._delivery_type: type[Delivery] = DelayedDelivery if config.delayed else Delivery
        self._purged = 0
        # msg_seqs whose first copy came by retransmission: no line carried them (yet). A line
        # copy that arrives later takes one off; what is left are the lines' holes.
        self._refilled: dict[int, None] = {}
        self._refilled_overflow = 0
        self._delivered = self._duplicates = self._conflicts = self._late = 0
        self._stale = self._gaps = self._requests = self._lost = 0
        self._garbage: dict[str, int] = {}

    def __repr__(self) -> str:
        return (
            f"<ChannelArbiter [channel={self._channel}, next={self._next}, buffered={len(self._buffer)}, "
            f"lines={len(self._lines)}, gaps={len(self._holes)}, term={self._highest_term}]>"
        )

    @property
    def channel(self) -> int | None:
        """The channel number (``None`` until adopted from the first packet)."""
        return self._channel

    @property
    def name(self) -> str:
        """The channel's name ("" when not given)."""
        return self._name

    @property
    def next_seq(self) -> int | None:
        """The next ``msg_seq`` to deliver (``None`` before the first packet)."""
        return self._next

    def on_packet(self, line: int, packet: bytes, *, now: float) -> list[Event]:
        """Take one packet from a line.

        Args:
            line: the index of the line it came from.
            packet: the packet bytes (the second ZeroMQ frame).
            now: the current time in seconds (any monotonic clock).

        Returns:
            The events this packet (and any timer now due) produced, in order.
        """
        counters = self._lines.get(line)
        if counters is None:
            counters = self._line(line)
        counters.packets += 1
        # Fast path: a live data packet of the current term that starts at or
        # below the delivery point, i.e. nearly every packet of a healthy
        # channel. Anything else (or anything _take_live declines) takes the
        # general path below, which checks and counts every case.
        if len(packet) > HEADER_SIZE:
            magic, version, flags, channel, adapter, term, first, count, _reserved, send_ns = _UNPACK_HEADER(
                packet
            )
            if (
                flags == self._live_flags
                and count
                and term == self._highest_term
                and channel == self._channel
                and magic == MAGIC
                and version == VERSION
            ):
                if self._refilled:
                    self._line_carried(first, count)
                out = self._take_live(line, counters, packet, first, count, term, send_ns)
                if out is not None:
                    if self._claims.pending:
                        self._claims.contradict(line)
                    counters.adapter = adapter
                    counters.last_term = term
                    return self._expire(now, out) if self._holes else out
        return self._on_packet_general(line, counters, packet, now)

    def _on_packet_general(
        self, line: int, counters: _LineCounters, packet: bytes, now: float
    ) -> list[Event]:
        # Every kind of packet, one block at a time (the reference behaviour).
        try:
            header = decode_header(packet)
        except WireError as exc:
            self._drop_garbage(counters, exc.reason, exc)
            return self._expire(now, [])
        if header.is_delayed != self._delayed:  # the other stream's packet (a misrouted line)
            self._drop_garbage(counters, "delayed", header.flags)
            return self._expire(now, [])
        if self._channel is None:
            self._channel = header.channel
        elif header.channel != self._channel:
            self._drop_garbage(counters, "channel", header.channel)
            return self._expire(now, [])
        out: list[Event] = []
        if not header.is_retransmission:
            if not self._check_term(line, header, counters, out):
                return self._expire(now, out)
            if not self._check_jump(line, header):
                self._suspect += 1
                return self._expire(now, out)
            if (
                self._claims.pending
                and header.term == self._highest_term
                and header.first_seq <= self._high + MAX_JUMP
            ):
                self._claims.contradict(line)  # an ordinary packet: other lines' claims start again
        first, count = header.first_seq, header.count
        if count and self._is_known_copy(first, packet):
            # Byte-identical to a packet whose blocks were all first copies.
            self._duplicates += count
            counters.duplicates += count
            counters.blocks += count
        elif count:
            try:
                blocks = decode_blocks(packet, header)
            except WireError as exc:
                self._drop_garbage(counters, exc.reason, exc)
                return self._expire(now, out)
            counters.blocks += count
            self._take_blocks(line, header, packet, blocks, counters, now, out)
        else:
            counters.heartbeats += 1
            self._start_at(first)
            if first > self._high:
                self._open_hole(self._high, first - 1, now)
                self._high = first
        counters.adapter = header.adapter
        counters.last_term = header.term
        if header.is_end_of_session and not header.is_retransmission and not self._ended:
            self._ended = True
            out.append(EndOfSession(header.channel, line, header.next_seq, channel_name=self._name))
        return self._expire(now, out)

    def on_garbage(self, line: int, *, reason: str) -> None:
        """Count something a line sent that never became a packet (e.g. a bad frame count)."""
        counters = self._line(line)
        counters.packets += 1
        self._drop_garbage(counters, reason, reason)

    def on_timer(self, *, now: float) -> list[Event]:
        """Fire what is due at ``now``: retransmission requests and lost gaps.

        Returns:
            ``RetransmissionNeeded``, ``GapLost`` and the ``Delivery`` events
            that a lost gap released, in order.
        """
        return self._expire(now, [])

    def missing(self, first_seq: int, last_seq: int) -> int:
        """How many of ``first_seq..last_seq`` are still in holes (known missing, not yet lost)."""
        return sum(
            max(0, min(hole.last, last_seq) - max(hole.first, first_seq) + 1)
            for hole in self._holes
            if hole.first <= last_seq and hole.last >= first_seq
        )

    def next_deadline(self) -> float | None:
        """When ``on_timer`` next has something to do, or ``None`` if nothing is pending."""
        if not self._holes:
            return None
        deadline = self._holes[0].detected_at + self._loss_timeout
        for hole in self._holes:
            if not hole.requested:
                return min(deadline, hole.detected_at + self._fill_timeout)
        return deadline

    def stats(self) -> ArbiterStats:
        """Return a snapshot of the counters."""
        return ArbiterStats(
            channel=self._channel,
            next_seq=self._next,
            delivered=self._delivered,
            duplicates=self._duplicates,
            conflicts=self._conflicts,
            late=self._late,
            stale=self._stale,
            garbage=sum(self._garbage.values()),
            garbage_reasons=dict(self._garbage),
            gaps=self._gaps,
            open_gaps=len(self._holes),
            retransmission_requests=self._requests,
            lost=self._lost,
            suspect=self._suspect,
            purged=self._purged,
            line_holes=len(self._refilled) + self._refilled_overflow,
            highest_term=self._highest_term,
            active_line=self._active_line,
            buffered=len(self._buffer),
            lines=tuple(counters.snapshot(line) for line, counters in sorted(self._lines.items())),
        )

    # -- decisions -----------------------------------------------------------

    def _line(self, line: int) -> _LineCounters:
        counters = self._lines.get(line)
        if counters is None:
            counters = self._lines[line] = _LineCounters()
        return counters

    def _drop_garbage(self, counters: _LineCounters, reason: str, detail: object) -> None:
        counters.garbage += 1
        self._garbage[reason] = self._garbage.get(reason, 0) + 1
        logger.debug("channel %s: dropped garbage packet (%s): %s", self._channel, reason, detail)

    def _check_term(self, line: int, header: PacketHeader, counters: _LineCounters, out: list[Event]) -> bool:
        # Follow the highest term; a lower one is a stale (demoted) sender. A
        # higher one fences the others only once confirmed (client_lib._claims):
        # until then its packets are taken like any line's.
        highest = self._highest_term
        if highest is None:
            self._highest_term = header.term
        elif header.term < highest:
            self._stale += 1
            counters.stale += 1
            return False
        elif header.term > highest:
            believed = self._claims.term(line, header.term, highest=highest)
            if believed is not None:
                out.append(TermChanged(header.channel, highest, believed, line, channel_name=self._name))
                logger.info("channel %s: term %d -> %d on line %d", header.channel, highest, believed, line)
                self._highest_term = believed
        return True

    def _check_jump(self, line: int, header: PacketHeader) -> bool:
        # A msg_seq far past everything seen is believed only once confirmed:
        # one bad packet must not open a gap of billions that is then skipped.
        if self._next is None or header.first_seq <= self._high + MAX_JUMP:
            return True
        return self._claims.jump(line, header.first_seq, high=self._high)

    def _start_at(self, first: int) -> None:
        if self._next is None:
            start = self._config.start_seq
            self._next = self._high = first if start is None else start

    def _is_known_copy(self, first: int, packet: bytes) -> bool:
        known = self._recent.get(first)
        # startswith at an offset compares in place: one slice, not two.
        return (
            known is not None
            and len(known) == len(packet)
            and known.startswith(packet[HEADER_SIZE:], HEADER_SIZE)
        )

    def _take_live(
        self,
        line: int,
        counters: _LineCounters,
        packet: bytes,
        first: int,
        count: int,
        term: int,
        send_time_ns: int,
    ) -> list[Event] | None:
        # Strategy: the per-packet fast path. It applies when every block is
        # either below the delivery point (a copy: duplicate, conflict or late)
        # or, with nothing buffered and no hole open, the next ones to deliver
        # in order. Then the block headers are walked in one tight loop (no
        # per-block method calls, Delivery built without __init__), checked
        # before anything changes, and the copies are checked against the ring
        # with three C-level slice comparisons. It returns None, having changed
        # nothing, when the general path must decide (or name the garbage).
        next_seq = self._next
        if next_seq is None or first > next_seq:
            return None
        last = first + count
        if last > next_seq and (self._buffer or self._holes):
            return None
        if self._is_known_copy(first, packet):
            self._duplicates += count
            counters.duplicates += count
            counters.blocks += count
            return []
        below = count if last <= next_seq else next_seq - first
        unpack = _UNPACK_BLOCK
        streams: list[int] = []
        source_seqs: list[int] = []
        add_stream = streams.append
        add_source_seq = source_seqs.append
        deliveries: list[Event] = []
        offset = HEADER_SIZE
        try:
            for _ in range(below):
                length, stream, source_seq = unpack(packet, offset)
                if length < _MIN_BLOCK_LENGTH:
                    return None
                add_stream(stream)
                add_source_seq(source_seq)
                offset += 2 + length
            if below < count:
                channel = self._channel
                new = object.__new__
                kind = self._delivery_type
                deliver = deliveries.append
                for seq in range(next_seq, last):
                    length, stream, source_seq = unpack(packet, offset)
                    if length < _MIN_BLOCK_LENGTH or stream == TOMBSTONE_STREAM:
                        return None  # a tombstone becomes a Purged event: the general path does that
                    end = offset + 2 + length
                    delivery = new(kind)
                    delivery.channel = channel  # type: ignore[assignment]  # checked equal to the header's
                    delivery.msg_seq = seq
                    delivery.source_stream = stream
                    delivery.source_seq = source_seq
                    delivery.line = line
                    delivery.term = term
                    delivery.send_time_ns = send_time_ns
                    delivery._packet = packet
                    delivery._start = offset + _BLOCK_OVERHEAD
                    delivery._end = end
                    deliver(delivery)
                    add_stream(stream)
                    add_source_seq(source_seq)
                    offset = end
        except struct.error:  # a block header runs past the end
            return None
        if offset != len(packet):
            return None
        counters.blocks += count
        out: list[Event] = []
        if below:
            self._check_copies(line, first, streams[:below], source_seqs[:below], counters, out)
        if deliveries:
            delivered = count - below
            self._remember(next_seq, streams[below:], source_seqs[below:])
            self._delivered += delivered
            self._next = last
            if last > self._high:
                self._high = last
            counters.first_copies += delivered
            self._active_line = line
            out += deliveries
            if not below:
                self._remember_packet(first, packet)
        return out

    def _check_copies(
        self,
        line: int,
        first: int,
        streams: list[int],
        source_seqs: list[int],
        counters: _LineCounters,
        out: list[Event],
    ) -> None:
        # Copies of delivered msg_seq first..first+len-1: usually all
        # duplicates, which three slice comparisons show at C speed.
        count = len(streams)
        window = self._window
        start = first % window
        stop = start + count
        if (
            stop <= window
            and self._ring_seq[start:stop] == list(range(first, first + count))
            and self._ring_source_seq[start:stop] == source_seqs
            and self._ring_stream[start:stop] == streams
        ):
            self._duplicates += count
            counters.duplicates += count
            return
        ring_seq, ring_stream, ring_source_seq = self._ring_seq, self._ring_stream, self._ring_source_seq
        for seq, stream, source_seq in zip(range(first, first + count), streams, source_seqs, strict=True):
            slot = seq % window
            if ring_seq[slot] != seq:
                self._late += 1
            elif ring_stream[slot] == stream and ring_source_seq[slot] == source_seq:
                self._duplicates += 1
                counters.duplicates += 1
            else:
                kept = (ring_stream[slot], ring_source_seq[slot])
                self._conflict(seq, line, kept, (stream, source_seq), out)

    def _remember(self, first: int, streams: list[int], source_seqs: list[int]) -> None:
        # Record delivered identities in the ring, a run at a time (slice
        # assignment; a run that wraps is cut in two).
        window = self._window
        count = len(streams)
        if count > window:  # only the last `window` stay
            cut = count - window
            first, streams, source_seqs, count = first + cut, streams[cut:], source_seqs[cut:], window
        start = first % window
        head = min(count, window - start)
        self._ring_seq[start : start + head] = range(first, first + head)
        self._ring_stream[start : start + head] = streams[:head]
        self._ring_source_seq[start : start + head] = source_seqs[:head]
        if head < count:
            rest = count - head
            self._ring_seq[:rest] = range(first + head, first + count)
            self._ring_stream[:rest] = streams[head:]
            self._ring_source_seq[:rest] = source_seqs[head:]

    def _remember_packet(self, first: int, packet: bytes) -> None:
        # A packet whose blocks were all first copies: a byte-identical copy
        # from another line is then all duplicates, no block walk needed.
        if first not in self._recent:
            self._recent_order.append(first)
            if len(self._recent_order) > _RECENT_PACKETS:
                del self._recent[self._recent_order.popleft()]
        self._recent[first] = packet

    def _take_blocks(
        self,
        line: int,
        header: PacketHeader,
        packet: bytes,
        blocks: list[tuple[int, int, int, int]],
        counters: _LineCounters,
        now: float,
        out: list[Event],
    ) -> None:
        first = header.first_seq
        self._start_at(first)
        if first > self._high:
            self._open_hole(self._high, first - 1, now)
            self._high = first
        replaced = self._supersede(line, header, packet, blocks, out) if self._buffer else ()
        if header.is_retransmission:
            self._note_refills(first, len(blocks))
        elif self._refilled:
            self._line_carried(first, len(blocks))
        before = counters.first_copies
        accept = self._accept
        kind = SessionBoundaryDelivery if header.is_end_of_session else self._delivery_type
        for index, (stream, source_seq, start, end) in enumerate(blocks):
            if replaced and first + index in replaced:
                continue
            accept(
                first + index,
                stream,
                source_seq,
                packet,
                start,
                end,
                line,
                header.term,
                header.send_time_ns,
                counters,
                out,
                kind,
            )
        if counters.first_copies - before == len(blocks):
            self._remember_packet(first, packet)

    def _note_refills(self, first: int, count: int) -> None:
        # Blocks of a retransmission that nobody delivered yet: they fill a hole of every line.
        next_seq, buffer, refilled = self._next, self._buffer, self._refilled
        assert next_seq is not None
        for seq in range(max(first, next_seq), first + count):
            if seq not in buffer and seq not in refilled:
                if len(refilled) >= _REFILLED_MAX:
                    self._refilled_overflow += 1
                else:
                    refilled[seq] = None

    def _line_carried(self, first: int, count: int) -> None:
        refilled = self._refilled
        for seq in range(first, first + count):
            refilled.pop(seq, None)

    def _accept(
        self,
        seq: int,
        stream: int,
        source_seq: int,
        packet: bytes,
        start: int,
        end: int,
        line: int,
        term: int,
        send_time_ns: int,
        counters: _LineCounters,
        out: list[Event],
        kind: type[Delivery] = Delivery,
    ) -> None:
        # Strategy: classify the block by where seq falls relative to the
        # delivery point, the reorder buffer and the known high-water mark.
        next_seq = self._next
        assert next_seq is not None and self._channel is not None
        if seq < next_seq:
            slot = seq % self._window
            if self._ring_seq[slot] != seq:
                self._late += 1
            elif self._ring_stream[slot] == stream and self._ring_source_seq[slot] == source_seq:
                self._duplicates += 1
                counters.duplicates += 1
            else:
                kept = (self._ring_stream[slot], self._ring_source_seq[slot])
                self._conflict(seq, line, kept, (stream, source_seq), out)
            return
        pending = self._buffer.get(seq)
        if pending is not None:
            if pending.source_stream == stream and pending.source_seq == source_seq:
                self._duplicates += 1
                counters.duplicates += 1
                return
            kept = (pending.source_stream, pending.source_seq)
            self._conflict(seq, line, kept, (stream, source_seq), out)
            return
        if seq >= self._high:
            self._high = seq + 1
        else:
            self._fill_hole(seq)
        delivery = kind(self._channel, seq, stream, source_seq, line, term, send_time_ns, packet, start, end)
        counters.first_copies += 1
        self._active_line = line
        if seq == next_seq:
            slot = seq % self._window
            self._ring_seq[slot] = seq
            self._ring_stream[slot] = stream
            self._ring_source_seq[slot] = source_seq
            self._next = seq + 1
            if kind is SessionBoundaryDelivery:
                self.boundaries += 1
            self._hand_over(delivery, out)
            if self._buffer:
                self._drain(out)
        else:
            self._buffer[seq] = delivery
            while len(self._buffer) > self._config.max_buffered:
                self._declare_lost(out)

    def _supersede(
        self,
        line: int,
        header: PacketHeader,
        packet: bytes,
        blocks: list[tuple[int, int, int, int]],
        out: list[Event],
    ) -> set[int]:
        # An undelivered copy from an older term (a zombie active's) loses to a
        # different copy from a newer term. Done before the main pass, because
        # filling a hole there would deliver the buffered copy behind it.
        replaced: set[int] = set()
        if header.is_retransmission:
            return replaced
        assert self._channel is not None
        for index, (stream, source_seq, start, end) in enumerate(blocks):
            seq = header.first_seq + index
            pending = self._buffer.get(seq)
            if pending is None or pending.term >= header.term:
                continue
            if (pending.source_stream, pending.source_seq) != (stream, source_seq):
                kind = SessionBoundaryDelivery if header.is_end_of_session else self._delivery_type
                self._buffer[seq] = kind(
                    self._channel,
                    seq,
                    stream,
                    source_seq,
                    line,
                    header.term,
                    header.send_time_ns,
                    packet,
                    start,
                    end,
                )
                self._conflict(
                    seq, line, (stream, source_seq), (pending.source_stream, pending.source_seq), out
                )
                replaced.add(seq)
        return replaced

    def _conflict(
        self, seq: int, line: int, kept: tuple[int, int], rejected: tuple[int, int], out: list[Event]
    ) -> None:
        assert self._channel is not None
        self._conflicts += 1
        logger.warning(
            "channel %s: conflict at msg_seq %d on line %d: kept %s, rejected %s",
            self._channel,
            seq,
            line,
            kept,
            rejected,
        )
        out.append(Conflict(self._channel, seq, line, kept, rejected, channel_name=self._name))

    def _deliver(self, delivery: Delivery, out: list[Event]) -> None:
        seq = delivery.msg_seq
        slot = seq % self._window
        self._ring_seq[slot] = seq
        self._ring_stream[slot] = delivery.source_stream
        self._ring_source_seq[slot] = delivery.source_seq
        self._next = seq + 1
        if type(delivery) is SessionBoundaryDelivery:
            self.boundaries += 1
        self._hand_over(delivery, out)

    def _hand_over(self, delivery: Delivery, out: list[Event]) -> None:
        # A message goes to the application; a tombstone becomes the Purged event in its place.
        if delivery.source_stream != TOMBSTONE_STREAM:
            self._delivered += 1
            out.append(delivery)
            return
        self._purged += 1
        assert self._channel is not None
        out.append(
            Purged.from_tombstone(
                self._channel,
                delivery.msg_seq,
                delivery.payload,
                delayed=self._delayed,
                channel_name=self._name,
            )
        )

    def _drain(self, out: list[Event]) -> None:
        buffer = self._buffer
        while self._next in buffer:
            self._deliver(buffer.pop(self._next), out)

    def _open_hole(self, first: int, last: int, now: float) -> None:
        self._gaps += 1
        self._holes.append(_Hole(first, last, now))
        logger.debug("channel %s: gap %d..%d", self._channel, first, last)

    def _fill_hole(self, seq: int) -> None:
        holes = self._holes
        index = 0 if holes[0].last >= seq else bisect_right(holes, seq, key=_hole_first) - 1
        hole = holes[index]
        assert hole.first <= seq <= hole.last, (seq, hole.first, hole.last)
        if hole.first == hole.last:
            del holes[index]
        elif seq == hole.first:
            hole.first += 1
        elif seq == hole.last:
            hole.last -= 1
        else:
            holes.insert(index + 1, _Hole(seq + 1, hole.last, hole.detected_at, hole.requested))
            hole.last = seq - 1

    def _declare_lost(self, out: list[Event]) -> None:
        assert self._channel is not None
        hole = self._holes.pop(0)
        assert hole.first == self._next, (hole.first, self._next)
        self._lost += hole.last - hole.first + 1
        logger.warning("channel %s: lost msg_seq %d..%d", self._channel, hole.first, hole.last)
        out.append(GapLost(self._channel, hole.first, hole.last, channel_name=self._name))
        self._next = hole.last + 1
        self._drain(out)

    def _expire(self, now: float, out: list[Event]) -> list[Event]:
        holes = self._holes
        if not holes:
            return out
        # Holes are sorted by age too, so only the front can be due for loss.
        while holes and now - holes[0].detected_at >= self._loss_timeout:
            self._declare_lost(out)
        for hole in holes:
            if hole.requested:
                continue
            if now - hole.detected_at < self._fill_timeout:
                break
            hole.requested = True
            self._requests += 1
            assert self._channel is not None
            out.append(
                RetransmissionNeeded(
                    self._channel, hole.first, hole.last, channel_name=self._name, delayed=self._delayed
                )
            )
        return out
