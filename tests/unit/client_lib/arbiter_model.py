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
- **Terms** (live packets; a retransmission is exempt): every live packet is
  its line's vote for its term. A line whose term went down votes, for
  ``DISTRUST_S`` after that (again from each time it goes down), the lowest
  term it showed since. A line is *live* when it sent any packet within
  ``LIVE_S``, or, never having sent one, within ``LIVE_S`` of the first live
  packet of any line. The term followed rises to the highest term more than
  half of the live lines vote at least (the first one too; none while no
  majority votes anything); a term followed is kept, or lowered to the highest
  term more than half of the live lines and of the silent lines voting at
  least it vote at least. The count is made when a live packet's term differs from
  the term followed or from its line's ``last_term``; a change is a
  ``TermChanged`` (not the first term). A live packet below the term
  followed is stale and dropped when its line voted at least that term
  before it, or the term was the first followed, or ``GRACE_S`` passed since
  it last rose; until a term is followed none is.
- **Far jumps**: a live packet more than ``MAX_JUMP`` past everything seen is
  a *claim*, believed when another line claims a position within ``MAX_JUMP``
  of it (both past ``MAX_JUMP``), or when the same line said it ``CONFIRM``
  times in a row; an ordinary packet from another line withdraws every
  other line's claim. Until believed it is dropped and counted suspect.
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
  the buffer. Unless a retransmitted copy took a msg_seq out of it since it was
  last asked for, when it comes of age: then it is asked for again
  (``RetransmissionNeeded``, before any other request) and its age starts
  over. Timers fire after each packet and on ``on_timer``.
- **Line holes**: a msg_seq whose first copy came by retransmission is a line
  hole until a live packet that is believed and well formed covers it.
- **End of session**: the first live packet believed with the flag gives
  ``EndOfSession``, once; its blocks are delivered as boundaries.

The model keeps no bound a scenario of these tests reaches (the arbiter's
4,096 known packets and 65,536 line holes).
"""

from __future__ import annotations

from dataclasses import dataclass

from feedha.client._claims import CONFIRM, DISTRUST_S, GRACE_S, LIVE_S, MAX_JUMP
from feedha.client.arbiter_stats import ArbiterStats, LineStats
from feedha.client.events import (
    ArbiterConfig,
    Conflict,
    Delivery,
    EndOfSession,
    Event,
    GapLost,
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
    shrunk: bool = False  # a retransmitted copy was taken out of it since it was last asked for


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
        self.raised_at: float | None = None  # when the term followed last rose from another
        self.votes: dict[int, tuple[int, float]] = {}  # line -> (its latest live packet's term, when)
        self.lowest: dict[int, tuple[int, float]] = {}  # line whose term went down -> (lowest since, until)
        self.first_vote: float | None = None
        self.heard: dict[int, float] = {}  # line -> when it last sent any packet
        self.known = set(range(lines))
        self.claims: dict[int, tuple[int, int]] = {}  # line -> (far position said, times in a row)
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
        self.heard[line] = now
        out: list[object] = []
        header = self._header(tally, packet)
        if header is not None and (header.is_retransmission or self._believed(line, header, tally, now, out)):
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

    def _believed(self, line: int, header: PacketHeader, tally: Tally, now: float, out: list[object]) -> bool:
        term = header.term
        shown = self._shown(line, now)  # its vote before this packet
        self._vote(line, term, now)
        if term != self.highest_term or term != tally.last_term:
            elected = self._elect(now)
            if elected != self.highest_term:
                if self.highest_term is not None and elected is not None:
                    out.append(
                        TermChanged(header.channel, self.highest_term, elected, line, channel_name=self.name)
                    )
                    if elected > self.highest_term:
                        self.raised_at = now
                self.highest_term = elected
        following = self.highest_term
        fenced = following is not None and (
            shown >= following or self.raised_at is None or now - self.raised_at >= GRACE_S
        )
        if following is not None and term < following and fenced:
            self.counts["stale"] += 1
            tally.stale += 1
            return False
        far = self.high + MAX_JUMP
        if header.first_seq > far and self.next is not None:
            if not self._claim(line, header.first_seq, far=far):
                self.counts["suspect"] += 1
                return False
        elif term == self.highest_term and header.first_seq <= far:
            # An ordinary packet: the other lines' claims are withdrawn.
            self.claims = {other: claim for other, claim in self.claims.items() if other == line}
        return True

    def _vote(self, line: int, term: int, now: float) -> None:
        if self.first_vote is None:
            self.first_vote = now
        self.known.add(line)
        before = self.votes.get(line)
        if before is not None and term < before[0]:
            lowest = self.lowest.get(line)
            still = lowest is not None and now < lowest[1]
            self.lowest[line] = (
                min(lowest[0], term) if lowest is not None and still else term,
                now + DISTRUST_S,
            )
        self.votes[line] = (term, now)

    def _shown(self, line: int, now: float) -> int:
        term = self.votes.get(line, (-1, 0.0))[0]
        lowest = self.lowest.get(line)
        return min(term, lowest[0]) if lowest is not None and now < lowest[1] else term

    def _elect(self, now: float) -> int | None:
        live: list[int] = []
        silent: list[int] = []
        for line in self.known:
            term = self._shown(line, now)
            when = self.heard.get(line, now if self.first_vote is None else self.first_vote)
            if now - when <= LIVE_S:
                live.append(term)
            elif line in self.votes:
                silent.append(term)

        def reached(votes: list[int], share: float) -> int:
            # The highest term that at least ``share`` of the votes reach (-1: none).
            return max((t for t in votes if sum(v >= t for v in votes) >= share * len(votes)), default=-1)

        following = self.highest_term
        raised = reached(live, 0.5 + 1e-9)  # more than half
        if following is None or raised > following:
            return None if raised < 0 else raised
        kept = reached(live + [term for term in silent if term >= following], 0.5 + 1e-9)  # more than half
        return following if kept < 0 else min(kept, following)

    def _claim(self, line: int, position: int, *, far: int) -> bool:
        said, times = self.claims.get(line, (None, 0))
        times = times + 1 if said is not None and position >= said else 1
        self.claims[line] = (position, times)
        backed = any(
            other != line and claimed > far and abs(claimed - position) <= MAX_JUMP
            for other, (claimed, _times) in self.claims.items()
        )
        if backed or times >= CONFIRM:
            self.claims.clear()
            return True
        return False

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
            if seq not in replaced and self._take_block(seq, copy, tally, out, retransmitted=not live):
                first_copies += 1
                if not live:
                    self.line_holes.add(seq)
        if first_copies == len(copies):
            self.clean[first] = packet

    def _kind(self) -> str:
        return "DelayedDelivery" if self.config.delayed else "Delivery"

    def _take_block(
        self, seq: int, copy: Copy, tally: Tally, out: list[object], *, retransmitted: bool
    ) -> bool:
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
            self._fill(seq, retransmitted)
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

    def _fill(self, seq: int, retransmitted: bool) -> None:
        (gap,) = [g for g in self.gaps if g.first <= seq <= g.last]
        index = self.gaps.index(gap)
        shrunk = gap.shrunk or retransmitted
        parts = [
            Gap(gap.first, seq - 1, gap.seen, gap.asked, shrunk),
            Gap(seq + 1, gap.last, gap.seen, gap.asked, shrunk),
        ]
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
            if not gap.shrunk:
                self._lose(gap, out)
                continue
            gap.shrunk, gap.asked, gap.seen = False, True, now
            self.counts["requests"] += 1
            assert self.channel is not None
            out.append(
                RetransmissionNeeded(
                    self.channel, gap.first, gap.last, channel_name=self.name, delayed=self.config.delayed
                )
            )
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
        front = self._gap_at(self.next)  # only the hole at the delivery point can be lost
        due = [front.seen + self.config.loss_timeout] if front is not None else []
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
