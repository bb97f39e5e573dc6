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

The arbiter decides which packets to believe -- what is garbage, which
stream and channel a packet belongs to, terms and far jumps of ``msg_seq``,
the end of a session -- and hands the blocks of those it believes to its
:class:`~feedha.client._delivery_stream.DeliveryStream`, which puts them in
``msg_seq`` order: each delivered once, copies checked, holes asked for and
declared lost after their timeouts (its module docstring has the details).

Nearly every packet of a healthy channel is a live data packet of the
current term that starts at or below the delivery point: those take a fast
path (``DeliveryStream.take_live``, one tight loop per packet); anything
else, or anything the fast path declines, takes the general path, which
decodes the packet with :mod:`feedha.proto.wire` and checks and counts
every case.

Terms fence zombies: packets with a term below the one the channel follows
are dropped as stale. The term followed is the one the admin server's routes
confirm (:meth:`ChannelArbiter.confirm_term`), or a higher one a majority of
the live lines show (:class:`~feedha.client._claims.TermVotes`): a term only
some lines claim fences nobody. Retransmitted packets are historical copies
served from a journal, so they are exempt from the fence and vote for no
term; their content is still checked against ``(source_stream, source_seq)``
like any copy.

An arbiter of a channel's *delayed* stream (``ArbiterConfig.delayed``) takes
only packets flagged delayed (and a real-time arbiter only the others: a
packet of the other stream is garbage, reason ``delayed``); it delivers
:class:`DelayedDelivery` values and asks for delayed ranges. On either stream a
tombstone block (a purged message) is delivered as a :class:`Purged` event in
its ``msg_seq``'s place. An arbiter of a channel's *conflated* stream
(``ArbiterConfig.conflated``) likewise takes only packets flagged conflated,
numbered by conf_seq; two copies of one conf_seq that name different
boundaries (their blocks' ``source_seq``) are a conflict.
"""

from __future__ import annotations

import logging
from typing import Final

from feedha.client._claims import GRACE_S, MAX_JUMP, Claims, TermVotes
from feedha.client._delivery_stream import DeliveryStream, LineCounters
from feedha.client.arbiter_stats import ArbiterStats
from feedha.client.events import ArbiterConfig, EndOfSession, Event, TermChanged
from feedha.proto.wire import (
    FLAG_CONFLATED,
    FLAG_DELAYED,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    VERSION,
    PacketHeader,
    WireError,
    decode_blocks,
    decode_header,
)

logger = logging.getLogger(__name__)

# The fast path reads the header itself (proto.wire's layout, same checks).
_UNPACK_HEADER: Final = HEADER.unpack_from


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
        self._channel = config.channel
        self._name = config.name
        self._stream = DeliveryStream(config)
        self._lines: dict[int, LineCounters] = {line: LineCounters() for line in range(lines)}
        self._highest_term: int | None = None  # the term followed (None: none yet)
        self._raised_at: float | None = None  # when it last rose from a term followed (None: never)
        self._votes = TermVotes(lines=lines)
        self._announce: list[Event] = []  # a TermChanged of a route's term, out with the next events
        self._claims = Claims()
        self._suspect = self._stale = 0
        self._ended = False
        self._delayed, self.conflated = config.delayed, config.conflated
        # the flags of a live data packet (the last packet of a conflation interval takes the general path)
        self._live_flags = FLAG_DELAYED if config.delayed else FLAG_CONFLATED if config.conflated else 0
        self._garbage: dict[str, int] = {}

    def __repr__(self) -> str:
        stream = self._stream
        return (
            f"<ChannelArbiter [channel={self._channel}, next={stream.next}, buffered={len(stream.buffer)}, "
            f"lines={len(self._lines)}, gaps={len(stream.holes)}, term={self._highest_term}]>"
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
        return self._stream.next

    @property
    def boundaries(self) -> int:
        """End-of-session blocks delivered so far (``SessionBoundaryDelivery``)."""
        return self._stream.boundaries

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
        counters.heard_at = now
        if len(packet) > HEADER_SIZE:  # the fast path (see the module docstring)
            magic, version, flags, channel, adapter, term, first, count, _reserved, send_ns = _UNPACK_HEADER(
                packet
            )
            if (
                flags == self._live_flags
                and count
                and term == self._highest_term
                and term == counters.last_term  # the line's vote has not changed
                and not self._announce  # a route's term change waits to be said
                and channel == self._channel
                and magic == MAGIC
                and version == VERSION
            ):
                stream = self._stream
                out = stream.take_live(line, counters, packet, first, count, term, send_ns)
                if out is not None:
                    if stream.refilled:
                        stream.line_carried(first, count)
                    if self._claims.pending:
                        self._claims.contradict(line)
                    counters.adapter = adapter
                    counters.last_term = term
                    return stream.expire(now, out) if stream.holes else out
        return self._on_packet_general(line, counters, packet, now)

    def _on_packet_general(self, line: int, counters: LineCounters, packet: bytes, now: float) -> list[Event]:
        # Every kind of packet, one block at a time (the reference behaviour).
        stream = self._stream
        out, self._announce = self._announce, []
        header = self._believe(line, counters, packet)
        if header is None:
            return stream.expire(now, out)
        if not header.is_retransmission and not self._is_current(line, header, counters, out, now):
            return stream.expire(now, out)
        first, count = header.first_seq, header.count
        if count and stream.recent.is_copy(first, packet):
            # Byte-identical to a packet whose blocks were all first copies.
            stream.duplicates += count
            counters.duplicates += count
            counters.blocks += count
            if stream.refilled and not header.is_retransmission:
                stream.line_carried(first, count)
        elif count:
            try:
                blocks = decode_blocks(packet, header)
            except WireError as exc:
                self._drop_garbage(counters, exc.reason, exc)
                return stream.expire(now, out)
            counters.blocks += count
            stream.take_blocks(line, header, packet, blocks, counters, now, out)
        else:
            counters.heartbeats += 1
            stream.reach(first, now)
        counters.adapter = header.adapter
        counters.last_term = header.term
        if header.is_end_of_session and not header.is_retransmission and not self._ended:
            self._ended = True
            out.append(EndOfSession(header.channel, line, header.next_seq, channel_name=self._name))
        return stream.expire(now, out)

    def _believe(self, line: int, counters: LineCounters, packet: bytes) -> PacketHeader | None:
        # The packet's header, if it is a packet of this channel's stream (else counted as garbage).
        try:
            header = decode_header(packet)
        except WireError as exc:
            self._drop_garbage(counters, exc.reason, exc)
            return None
        if header.is_delayed != self._delayed:  # the other stream's packet (a misrouted line)
            self._drop_garbage(counters, "delayed", header.flags)
            return None
        if header.is_conflated != self.conflated:
            self._drop_garbage(counters, "conflated", header.flags)
            return None
        if self._channel is None:
            self._channel = self._stream.channel = header.channel
        elif header.channel != self._channel:
            self._drop_garbage(counters, "channel", header.channel)
            return None
        return header

    def _is_current(
        self, line: int, header: PacketHeader, counters: LineCounters, out: list[Event], now: float
    ) -> bool:
        # A live packet (not a retransmission) of a term and a msg_seq to believe; an
        # ordinary one contradicts the other lines' claims.
        if not self._check_term(line, header, counters, out, now):
            return False
        if not self._check_jump(line, header):
            self._suspect += 1
            return False
        if (
            self._claims.pending
            and header.term == self._highest_term
            and header.first_seq <= self._stream.high + MAX_JUMP
        ):
            self._claims.contradict(line)  # other lines' claims start again
        return True

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
        out, self._announce = self._announce, []
        return self._stream.expire(now, out)

    def confirm_term(self, term: int, *, now: float) -> None:
        """The admin server's routes carry ``term`` (0: they carry none): follow it, or a higher one.

        A :class:`TermChanged` (line -1) comes out with the next events when the term followed changed.
        """
        if term <= 0:
            return
        self._votes.confirm(term)
        self._follow(self._elect(now), -1, self._announce, now)

    def missing(self, first_seq: int, last_seq: int) -> int:
        """How many of ``first_seq..last_seq`` are still in holes (known missing, not yet lost)."""
        return self._stream.holes.missing(first_seq, last_seq)

    def next_deadline(self) -> float | None:
        """When ``on_timer`` next has something to do, or ``None`` if nothing is pending."""
        return self._stream.next_deadline()

    def stats(self) -> ArbiterStats:
        """Return a snapshot of the counters."""
        stream = self._stream
        return ArbiterStats(
            channel=self._channel,
            next_seq=stream.next,
            delivered=stream.delivered,
            duplicates=stream.duplicates,
            conflicts=stream.conflicts,
            late=stream.late,
            stale=self._stale,
            garbage=sum(self._garbage.values()),
            garbage_reasons=dict(self._garbage),
            gaps=stream.holes.opened,
            open_gaps=len(stream.holes),
            retransmission_requests=stream.holes.requests,
            lost=stream.lost,
            suspect=self._suspect,
            purged=stream.purged,
            line_holes=len(stream.refilled) + stream.refilled_overflow,
            highest_term=self._highest_term,
            active_line=stream.active_line,
            buffered=len(stream.buffer),
            lines=tuple(counters.snapshot(line) for line, counters in sorted(self._lines.items())),
        )

    # -- decisions -----------------------------------------------------------

    def _line(self, line: int) -> LineCounters:
        counters = self._lines.get(line)
        if counters is None:
            counters = self._lines[line] = LineCounters()
        return counters

    def _drop_garbage(self, counters: LineCounters, reason: str, detail: object) -> None:
        counters.garbage += 1
        self._garbage[reason] = self._garbage.get(reason, 0) + 1
        logger.debug("channel %s: dropped garbage packet (%s): %s", self._channel, reason, detail)

    def _check_term(
        self, line: int, header: PacketHeader, counters: LineCounters, out: list[Event], now: float
    ) -> bool:
        # The packet's term is its line's vote; the channel follows what the routes and a
        # majority of the lines show (client_lib._claims), and a lower term is a stale
        # (demoted, or forged) sender. Voting again only when something changed: a term
        # other than the one followed, or a line whose own term changed.
        # Below the term followed, a line that showed it already is fenced at once; one that
        # has not yet, GRACE_S after the term rose (its packets from before the promotion may be
        # read after the route update or the lines that raised it).
        term, following = header.term, self._highest_term
        shown = self._votes.shown(line, now=now)  # its vote before this packet
        self._votes.vote(line, term, now=now)
        if term != following or term != counters.last_term:
            following = self._follow(self._elect(now), line, out, now)
        raised = self._raised_at
        if (
            following is not None
            and term < following
            and (shown >= following or raised is None or now - raised >= GRACE_S)
        ):
            self._stale += 1
            counters.stale += 1
            return False
        return True

    def _elect(self, now: float) -> int | None:
        heard = {line: counters.heard_at for line, counters in self._lines.items()}
        return self._votes.elect(following=self._highest_term, heard=heard, now=now)

    def _follow(self, elected: int | None, line: int, out: list[Event], now: float) -> int | None:
        # Follow the elected term; a change of a term followed is said (the first one is not).
        following = self._highest_term
        if elected == following:
            return following
        self._highest_term = elected
        if following is not None and elected is not None:
            if elected > following:
                self._raised_at = now
            out.append(TermChanged(self._channel or 0, following, elected, line, channel_name=self._name))
            how = "the routes" if line < 0 else f"line {line}"
            logger.info("channel %s: term %d -> %d (%s)", self._channel, following, elected, how)
        return elected

    def _check_jump(self, line: int, header: PacketHeader) -> bool:
        # A msg_seq far past everything seen is believed only once confirmed:
        # one bad packet must not open a gap of billions that is then skipped.
        if self._stream.next is None or header.first_seq <= self._stream.high + MAX_JUMP:
            return True
        return self._claims.jump(line, header.first_seq, high=self._stream.high)
