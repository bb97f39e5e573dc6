"""A model of line arbitration that states the rules directly, to check ``ChannelArbiter`` against.

:class:`Model` takes the same packets and times as the arbiter and returns
the same events, written as plainly as arbitration can be: every packet
through :func:`feedha.proto.wire.decode_header` and ``decode_blocks``, one
block at a time, what was delivered, buffered and missing in plain dicts and
lists. No fast path, no ring of slices, no sorted ranges with bisection, no
byte offsets. Its rules:

- **Garbage**: a packet that does not decode, belongs to the other stream
  (real-time vs delayed) or another channel is counted by reason and changes
  nothing else. The channel number is adopted from the first packet that
  decodes, when not configured.
- **Terms** (live packets; a retransmission is exempt): a term above the
  believed one -- any term, while none is believed yet -- is a *claim*,
  believed when another line claims more than the believed term (then the
  lesser of the two), or when the same line said it ``CONFIRM`` times in a
  row, counting again whenever another line sent an ordinary packet; its
  blocks are taken either way, and until a first term is believed no packet
  is stale. A lower term than the believed one is stale and dropped.
- **Far jumps**: a live packet more than ``MAX_JUMP`` past everything seen is
  a claim of the same kind (backed by another line's claim within
  ``MAX_JUMP`` of it); until believed it is dropped and counted suspect.
- **Order**: delivery starts at ``start_seq`` or the first msg_seq believed;
  each msg_seq's first copy is delivered once, in msg_seq order; one that
  comes early waits in the buffer; a msg_seq below the delivery point again
  is a duplicate (same ``(source_stream, source_seq)``), a conflict (another
  one; the first copy stays), or late (not remembered: lost, before the
  start, or pushed out of the conflict window, a table of ``window`` places
  where msg_seq m sits at ``m % window`` until a later delivery takes its
  place). A buffered copy from an older term that a live packet of a newer
  term contradicts is replaced (a conflict that keeps the newer), before that
  packet delivers anything.
- **Known copies**: a packet whose bytes after the header equal those of the
  last packet at the same first msg_seq whose blocks were all first copies is
  all duplicates.
- **Holes**: whatever lies between the highest msg_seq seen and a packet's (or
  heartbeat's) first msg_seq is missing since now; a copy that arrives takes
  its msg_seq out. A hole older than ``fill_timeout`` is asked for once
  (``RetransmissionNeeded``, in msg_seq order); the hole at the delivery point,
  once older than ``loss_timeout`` or while the buffer holds more than
  ``max_buffered``, is lost (``GapLost``): delivery moves past it and on through
  the buffer. Timers fire after each packet and on ``on_timer``.
- **Line holes**: a msg_seq whose first copy came by retransmission is a line
  hole until a live packet that is believed and well formed covers it.
- **End of session**: the first live packet believed with the flag gives
  ``EndOfSession``, once; its blocks are delivered as boundaries.

The model keeps no bound a scenario of these tests reaches (the arbiter's
4,096 known packets and 65,536 line holes).
"""

from __future__ import annotations

from dataclasses import dataclass

from feedha.client._claims import CONFIRM, MAX_JUMP
from feedha.client.events import (
    ArbiterConfig,
    ArbiterStats,
    Conflict,
    Delivery,
    EndOfSession,
    Event,
    GapLost,
    LineStats,
    Purged,
    RetransmissionNeeded,
    TermChanged,
)
from feedha.proto.wire import (
    HEADER_SIZE,
    TOMBSTONE_STREAM,
    PacketHeader,
    WireError,
    decode_blocks,
    decode_header,
)

Identity = tuple[int, int]  # (source_stream, source_seq)


@dataclass
class Copy:
    """One copy of a msg_seq: what it says and where it came from."""

    identity: Identity
    term: int
    line: int
    kind: str  # the Delivery class it is delivered as
    send_time_ns: int
    payload: bytes


@dataclass
class Gap:
    """Missing msg_seqs first..last, seen at ``seen``; ``asked`` once requested."""

    first: int
    last: int
    seen: float
    asked: bool = False


@dataclass
class Tally:
    """Per line, as ``LineStats``."""

    adapter: int | None = None
    packets: int = 0
    blocks: int = 0
    heartbeats: int = 0
    first_copies: int = 0
    duplicates: int = 0
    garbage: int = 0
    stale: int = 0
    last_term: int | None = None


def delivery_key(event: Event) -> object:
    """An event as the model gives it: a Delivery (any kind) as a tuple of its fields, else itself."""
    if isinstance(event, Delivery):
        return (
            type(event).__name__,
            *(event.channel, event.msg_seq, event.source_stream, event.source_seq, event.line),
            *(event.term, event.send_time_ns, event.payload),
        )
    return event


class Model:
    """Arbitration of one channel, by the rules of the module docstring."""

    def __init__(self, config: ArbiterConfig, *, lines: int = 0) -> None:
        self.config = config
        self.name = config.name
        self.channel = config.channel
        self.next: int | None = None
        self.high = 0  # above every msg_seq seen
        self.delivered: dict[int, Identity] = {}
        self.places: dict[int, int] = {}  # msg_seq % window -> the latest msg_seq delivered there
        self.buffer: dict[int, Copy] = {}
        self.gaps: list[Gap] = []
        self.highest_term: int | None = None
        self.claims: dict[str, dict[int, tuple[int, int]]] = {"term": {}, "jump": {}}  # line -> (said, times)
        self.clean: dict[
            int, bytes
        ] = {}  # first msg_seq -> the last packet whose blocks were all first copies
        self.line_holes: set[int] = set()
        self.ended = False
        self.tallies: dict[int, Tally] = {line: Tally() for line in range(lines)}
        self.counts = dict.fromkeys(("delivered", "duplicates", "conflicts", "late", "stale"), 0)
        self.counts |= dict.fromkeys(("gaps", "requests", "lost", "suspect", "purged", "boundaries"), 0)
        self.garbage: dict[str, int] = {}
        self.active_line: int | None = None

    # -- packets ---------------------------------------------------------------------

    def on_packet(self, line: int, packet: bytes, now: float) -> list[object]:
        """The events of one packet from ``line`` (``delivery_key`` form for deliveries)."""
        tally = self.tallies.setdefault(line, Tally())
        tally.packets += 1
        out: list[object] = []
        header = self._header(tally, packet)
        if header is not None and (header.is_retransmission or self._believed(line, header, tally, out)):
            self._take(line, header, packet, tally, now, out)
        return self.on_timer(now, out)

    def on_garbage(self, line: int, reason: str) -> None:
        """A frame that never became a packet."""
        tally = self.tallies.setdefault(line, Tally())
        tally.packets += 1
        self._garbage(tally, reason)

    def _garbage(self, tally: Tally, reason: str) -> None:
        tally.garbage += 1
        self.garbage[reason] = self.garbage.get(reason, 0) + 1

    def _header(self, tally: Tally, packet: bytes) -> PacketHeader | None:
        try:
            header = decode_header(packet)
        except WireError as exc:
            self._garbage(tally, exc.reason)
            return None
        if header.is_delayed != self.config.delayed:
            self._garbage(tally, "delayed")
            return None
        if self.channel is None:
            self.channel = header.channel
        if header.channel != self.channel:
            self._garbage(tally, "channel")
            return None
        return header

    def _believed(self, line: int, header: PacketHeader, tally: Tally, out: list[object]) -> bool:
        if self.highest_term is None:
            self.highest_term = self._claim("term", line, header.term, above=-1, near=None)
        elif header.term < self.highest_term:
            self.counts["stale"] += 1
            tally.stale += 1
            return False
        elif header.term > self.highest_term:
            believed = self._claim("term", line, header.term, above=self.highest_term, near=None)
            if believed is not None:
                out.append(
                    TermChanged(header.channel, self.highest_term, believed, line, channel_name=self.name)
                )
                self.highest_term = believed
        far = self.high + MAX_JUMP
        if header.first_seq > far and self.next is not None:
            if self._claim("jump", line, header.first_seq, above=far, near=MAX_JUMP) is None:
                self.counts["suspect"] += 1
                return False
        elif header.term == self.highest_term and header.first_seq <= far:
            # An ordinary packet: the other lines' claims start counting again.
            for claims in self.claims.values():
                for other, (said, _times) in claims.items():
                    if other != line:
                        claims[other] = (said, 0)
        return True

    def _claim(self, kind: str, line: int, value: int, *, above: int, near: int | None) -> int | None:
        claims = self.claims[kind]
        said, times = claims.get(line, (None, 0))
        times = times + 1 if said is not None and value >= said else 1
        claims[line] = (value, times)
        backing = [
            v
            for other, (v, _t) in claims.items()
            if other != line and v > above and (near is None or abs(v - value) <= near)
        ]
        believed = min(value, max(backing)) if backing else value if times >= CONFIRM else None
        if believed is not None:
            # The first term believed leaves the claims of later terms open.
            first = kind == "term" and above < 0
            kept = {other: claim for other, claim in claims.items() if first and claim[0] > believed}
            claims.clear()
            claims.update(kept)
        return believed

    def _take(
        self, line: int, header: PacketHeader, packet: bytes, tally: Tally, now: float, out: list[object]
    ) -> None:
        first, count, live = header.first_seq, header.count, not header.is_retransmission
        known = self.clean.get(first)
        if count and known is not None and known[HEADER_SIZE:] == packet[HEADER_SIZE:]:
            self.counts["duplicates"] += count
            tally.duplicates += count
            tally.blocks += count
            if live:
                self.line_holes -= set(range(first, first + count))
        elif count:
            try:
                blocks = decode_blocks(packet, header)
            except WireError as exc:
                self._garbage(tally, exc.reason)
                return
            tally.blocks += count
            self._take_blocks(line, header, packet, blocks, tally, now, out)
        else:
            tally.heartbeats += 1
            self._reach(first, now)
        tally.adapter, tally.last_term = header.adapter, header.term
        if header.is_end_of_session and live and not self.ended:
            self.ended = True
            out.append(EndOfSession(header.channel, line, header.next_seq, channel_name=self.name))

    def _reach(self, first: int, now: float) -> None:
        if self.next is None:
            self.next = self.high = first if self.config.start_seq is None else self.config.start_seq
        if first > self.high:
            self.gaps.append(Gap(self.high, first - 1, now))
            self.counts["gaps"] += 1
            self.high = first

    # -- blocks ----------------------------------------------------------------------

    def _take_blocks(
        self,
        line: int,
        header: PacketHeader,
        packet: bytes,
        blocks: list[tuple[int, int, int, int]],
        tally: Tally,
        now: float,
        out: list[object],
    ) -> None:
        first, live = header.first_seq, not header.is_retransmission
        self._reach(first, now)
        kind = "SessionBoundaryDelivery" if header.is_end_of_session else self._kind()
        copies = {
            first + i: Copy(
                (stream, source_seq), header.term, line, kind, header.send_time_ns, packet[start:end]
            )
            for i, (stream, source_seq, start, end) in enumerate(blocks)
        }
        replaced = set()
        if live:
            self.line_holes -= set(copies)
            for seq, copy in copies.items():  # a newer term's copy replaces a buffered older one first
                old = self.buffer.get(seq)
                if old is not None and old.term < copy.term and old.identity != copy.identity:
                    self.buffer[seq] = copy
                    replaced.add(seq)
                    out.append(
                        Conflict(self.channel, seq, line, copy.identity, old.identity, channel_name=self.name)
                    )
                    self.counts["conflicts"] += 1
        first_copies = 0
        for seq, copy in copies.items():
            if seq not in replaced and self._take_block(seq, copy, tally, out):
                first_copies += 1
                if not live:
                    self.line_holes.add(seq)
        if first_copies == len(copies):
            self.clean[first] = packet

    def _kind(self) -> str:
        return "DelayedDelivery" if self.config.delayed else "Delivery"

    def _take_block(self, seq: int, copy: Copy, tally: Tally, out: list[object]) -> bool:
        """One block; returns whether it was the first copy of its msg_seq."""
        assert self.next is not None
        if seq < self.next or seq in self.buffer:
            kept = self._remembered(seq) if seq < self.next else self.buffer[seq].identity
            if kept is None:
                self.counts["late"] += 1
            elif kept == copy.identity:
                self.counts["duplicates"] += 1
                tally.duplicates += 1
            else:
                self.counts["conflicts"] += 1
                out.append(
                    Conflict(self.channel, seq, copy.line, kept, copy.identity, channel_name=self.name)
                )
            return False
        if seq >= self.high:
            self.high = seq + 1
        else:
            self._fill(seq)
        tally.first_copies += 1
        self.active_line = copy.line
        self.buffer[seq] = copy
        self._deliver_what_is_next(out)
        while len(self.buffer) > self.config.max_buffered:
            self._lose(self._gap_at(self.next), out)
        return True

    def _remembered(self, seq: int) -> Identity | None:
        if seq not in self.delivered or self.places[seq % self.config.conflict_window] != seq:
            return None
        return self.delivered[seq]

    def _fill(self, seq: int) -> None:
        (gap,) = [g for g in self.gaps if g.first <= seq <= g.last]
        index = self.gaps.index(gap)
        parts = [Gap(gap.first, seq - 1, gap.seen, gap.asked), Gap(seq + 1, gap.last, gap.seen, gap.asked)]
        self.gaps[index : index + 1] = [p for p in parts if p.first <= p.last]

    def _gap_at(self, seq: int | None) -> Gap | None:
        if seq is None:
            return None
        return next((g for g in self.gaps if g.first <= seq <= g.last), None)

    def _deliver_what_is_next(self, out: list[object]) -> None:
        while self.next in self.buffer:
            seq = self.next
            copy = self.buffer.pop(seq)
            self.delivered[seq] = copy.identity
            self.places[seq % self.config.conflict_window] = seq
            self.next = seq + 1
            self.counts["boundaries"] += copy.kind == "SessionBoundaryDelivery"
            assert self.channel is not None
            if copy.identity[0] == TOMBSTONE_STREAM:
                self.counts["purged"] += 1
                out.append(
                    Purged.from_tombstone(
                        self.channel, seq, copy.payload, delayed=self.config.delayed, channel_name=self.name
                    )
                )
            else:
                self.counts["delivered"] += 1
                out.append(
                    (
                        copy.kind,
                        self.channel,
                        seq,
                        *copy.identity,
                        copy.line,
                        copy.term,
                        copy.send_time_ns,
                        copy.payload,
                    )
                )

    def _lose(self, gap: Gap | None, out: list[object]) -> None:
        assert gap is not None and self.channel is not None and gap.first == self.next
        self.gaps.remove(gap)
        self.counts["lost"] += gap.last - gap.first + 1
        out.append(GapLost(self.channel, gap.first, gap.last, channel_name=self.name))
        self.next = gap.last + 1
        self._deliver_what_is_next(out)

    # -- time ------------------------------------------------------------------------

    def on_timer(self, now: float, out: list[object] | None = None) -> list[object]:
        """What is due at ``now``: lost holes first, then requests."""
        out = [] if out is None else out
        while (gap := self._gap_at(self.next)) is not None and now - gap.seen >= self.config.loss_timeout:
            self._lose(gap, out)
        for gap in sorted(self.gaps, key=lambda g: g.first):
            if not gap.asked and now - gap.seen >= self.config.fill_timeout:
                gap.asked = True
                self.counts["requests"] += 1
                assert self.channel is not None
                out.append(
                    RetransmissionNeeded(
                        self.channel, gap.first, gap.last, channel_name=self.name, delayed=self.config.delayed
                    )
                )
        return out

    def next_deadline(self) -> float | None:
        """The earliest time something is due: a hole's loss, or a hole not asked for yet."""
        due = [g.seen + self.config.loss_timeout for g in self.gaps]
        due += [g.seen + self.config.fill_timeout for g in self.gaps if not g.asked]
        return min(due, default=None)

    def missing(self, first: int, last: int) -> int:
        """How many of first..last are in a hole."""
        return sum(max(0, min(g.last, last) - max(g.first, first) + 1) for g in self.gaps)

    def stats(self) -> ArbiterStats:
        """The counters, as ``ChannelArbiter.stats`` gives them."""
        counts = self.counts
        return ArbiterStats(
            channel=self.channel,
            next_seq=self.next,
            delivered=counts["delivered"],
            duplicates=counts["duplicates"],
            conflicts=counts["conflicts"],
            late=counts["late"],
            stale=counts["stale"],
            garbage=sum(self.garbage.values()),
            garbage_reasons=dict(self.garbage),
            gaps=counts["gaps"],
            open_gaps=len(self.gaps),
            retransmission_requests=counts["requests"],
            lost=counts["lost"],
            suspect=counts["suspect"],
            purged=counts["purged"],
            line_holes=len(self.line_holes),
            highest_term=self.highest_term,
            active_line=self.active_line,
            buffered=len(self.buffer),
            lines=tuple(LineStats(line=line, **vars(tally)) for line, tally in sorted(self.tallies.items())),
        )

    def describe(self) -> str:
        """``repr(ChannelArbiter)``."""
        return (
            f"<ChannelArbiter [channel={self.channel}, next={self.next}, buffered={len(self.buffer)}, "
            f"lines={len(self.tallies)}, gaps={len(self.gaps)}, term={self.highest_term}]>"
        )
