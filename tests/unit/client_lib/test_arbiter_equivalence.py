"""The arbiter's fast path against the arbiter as it was before it (the reference).

``ReferenceArbiter`` below is ``client_lib/arbiter.py``'s ``ChannelArbiter`` as
of commit 941ecad (before the per-packet fast path), kept verbatim apart from
its name: every packet went through ``decode_header``/``decode_blocks`` and
one ``_accept`` per block. Random two-line packet streams -- packets cut at
different boundaries per line, identical or differing payloads, drops,
duplicates, reorders, heartbeats, conflicts, a promotion with stale packets
from the old active, retransmissions, garbage, end of session, timers --
must give the same events (field by field), stats, deadlines and repr.

Since then the reference has changed in one place, as the arbiter did: a
higher term and a far ``msg_seq`` jump are claims believed only once
confirmed (``client_lib._claims``; ``_check_term`` and ``_check_jump``).
"""

# ruff: noqa: E501
from __future__ import annotations

import logging
import random
from bisect import bisect_right
from collections import deque
from dataclasses import replace
from typing import Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedha.client._claims import MAX_JUMP, Claims
from feedha.client.arbiter import ChannelArbiter
from feedha.client.events import (
    ArbiterConfig,
    ArbiterStats,
    Conflict,
    Delivery,
    EndOfSession,
    Event,
    GapLost,
    LineStats,
    RetransmissionNeeded,
    TermChanged,
)
from feedha.proto.wire import (
    FLAG_END_OF_SESSION,
    FLAG_RETRANSMISSION,
    HEADER_SIZE,
    PacketHeader,
    WireError,
    decode_blocks,
    decode_header,
    encode_packet,
)

logger = logging.getLogger(__name__)

_RECENT_PACKETS: Final = 4096

# --- the reference: client_lib/arbiter.py at 941ecad ------------------------------------


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


class ReferenceArbiter:
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
        counters = self._line(line)
        counters.packets += 1
        try:
            header = decode_header(packet)
        except WireError as exc:
            self._drop_garbage(counters, exc.reason, exc)
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
            out.append(EndOfSession(header.channel, line, header.next_seq))
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
        # Follow the highest term; a lower one is a stale (demoted) sender.
        if self._highest_term is None:
            self._highest_term = header.term
        elif header.term < self._highest_term:
            self._stale += 1
            counters.stale += 1
            return False
        elif header.term > self._highest_term:
            believed = self._claims.term(line, header.term, highest=self._highest_term)
            if believed is not None:
                out.append(TermChanged(header.channel, self._highest_term, believed, line))
                self._highest_term = believed
        return True

    def _check_jump(self, line: int, header: PacketHeader) -> bool:
        if self._next is None or header.first_seq <= self._high + MAX_JUMP:
            return True
        return self._claims.jump(line, header.first_seq, high=self._high)

    def _start_at(self, first: int) -> None:
        if self._next is None:
            start = self._config.start_seq
            self._next = self._high = first if start is None else start

    def _is_known_copy(self, first: int, packet: bytes) -> bool:
        known = self._recent.get(first)
        return known is not None and len(known) == len(packet) and known[HEADER_SIZE:] == packet[HEADER_SIZE:]

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
        before = counters.first_copies
        accept = self._accept
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
            )
        if counters.first_copies - before == len(blocks):
            if first not in self._recent:
                self._recent_order.append(first)
                if len(self._recent_order) > _RECENT_PACKETS:
                    del self._recent[self._recent_order.popleft()]
            self._recent[first] = packet

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
        delivery = Delivery(
            self._channel, seq, stream, source_seq, line, term, send_time_ns, packet, start, end
        )
        counters.first_copies += 1
        self._active_line = line
        if seq == next_seq:
            slot = seq % self._window
            self._ring_seq[slot] = seq
            self._ring_stream[slot] = stream
            self._ring_source_seq[slot] = source_seq
            self._delivered += 1
            self._next = seq + 1
            out.append(delivery)
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
                self._buffer[seq] = Delivery(
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
        out.append(Conflict(self._channel, seq, line, kept, rejected))

    def _deliver(self, delivery: Delivery, out: list[Event]) -> None:
        seq = delivery.msg_seq
        slot = seq % self._window
        self._ring_seq[slot] = seq
        self._ring_stream[slot] = delivery.source_stream
        self._ring_source_seq[slot] = delivery.source_seq
        self._delivered += 1
        self._next = seq + 1
        out.append(delivery)

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
        out.append(GapLost(self._channel, hole.first, hole.last))
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
            out.append(RetransmissionNeeded(self._channel, hole.first, hole.last))
        return out


# --- scenarios ------------------------------------------------------------------------------

CHANNEL = 5
Step = tuple[str, int, bytes, float]  # ("packet", line, bytes, now) or ("timer", 0, b"", now)


def _cut(rng: random.Random, first: int, last: int, most: int) -> list[tuple[int, int]]:
    """Split first..last into runs of 1..most msg_seq."""
    runs, seq = [], first
    while seq <= last:
        size = min(rng.randint(1, most), last - seq + 1)
        runs.append((seq, size))
        seq += size
    return runs


def _garble(rng: random.Random, packet: bytes) -> bytes:
    kind = rng.randrange(7)
    if kind == 0:
        return packet[: rng.randrange(HEADER_SIZE)]  # truncated header
    if kind == 1:
        return b"XX" + packet[2:]  # magic
    if kind == 2:
        return packet + b"\x00" * rng.randint(1, 3)  # trailing bytes
    if kind == 3 and len(packet) > HEADER_SIZE + 1:
        return packet[: rng.randrange(HEADER_SIZE + 1, len(packet))]  # a block runs past the end
    if kind == 4 and len(packet) > HEADER_SIZE + 2:
        return packet[:HEADER_SIZE] + bytes([0, rng.randrange(10)]) + packet[HEADER_SIZE + 2 :]  # length < 10
    if kind == 5:
        return packet[:4] + (CHANNEL + 1).to_bytes(2, "big") + packet[6:]  # another channel
    return packet[:2] + b"\x09" + packet[3:]  # version


def scenario(seed: int, *, lines: int = 2) -> tuple[ArbiterConfig, list[Step]]:
    """A random stream of packets from ``lines`` lines, with every kind of trouble."""
    rng = random.Random(seed)
    first = rng.choice([0, 1, 7, 65_530, 10**6])
    count = rng.randint(1, 300)
    last = first + count - 1
    # Identities by msg_seq (one source stream usually, sometimes two).
    identity = {seq: (1 + (rng.random() < 0.1), 10_000 + seq) for seq in range(first, last + 1)}
    same_payloads = rng.random() < 0.5
    promote_at = rng.choice([None, first + count // 2]) if lines > 1 else None
    conflict_rate = rng.choice([0.0, 0.0, 0.02])
    drop_rate = rng.choice([0.0, 0.05, 0.2, 0.5])
    config = ArbiterConfig(
        channel=rng.choice([CHANNEL, None]),
        fill_timeout=0.05,
        loss_timeout=rng.choice([0.05, 0.5]),
        start_seq=rng.choice([None, None, first, first + rng.randint(0, 20)]),
        max_buffered=rng.choice([100_000, 4, 50]),
        conflict_window=rng.choice([65_536, 1, 7, 64]),
    )
    per_line: list[list[bytes]] = []
    for line in range(lines):
        adapter = line + 1
        packets: list[bytes] = []
        for start, size in _cut(rng, first, last, rng.choice([1, 4, 9, 30])):
            term = 1
            if promote_at is not None and start + size > promote_at:
                term = 2 if line == 1 else 1  # line 1 is promoted; line 0 goes on as a zombie
            blocks = []
            for seq in range(start, start + size):
                stream, source_seq = identity[seq]
                if line and rng.random() < conflict_rate:
                    source_seq += 1
                payload = b"m%d" % seq if same_payloads else b"m%d/%d" % (seq, line)
                blocks.append((stream, source_seq, payload * rng.choice([1, 1, 3])))
            flags = FLAG_END_OF_SESSION if start + size > last and rng.random() < 0.5 else 0
            pkt = encode_packet(
                channel=CHANNEL,
                adapter=adapter,
                term=term,
                first_seq=start,
                blocks=blocks,
                send_time_ns=(1_000 + start) * (1 if same_payloads else adapter),
                flags=flags,
            )
            if rng.random() < drop_rate:
                continue
            packets.append(pkt)
            if rng.random() < 0.05:
                packets.append(pkt)  # duplicated on the line
            if rng.random() < 0.05:
                packets.append(_garble(rng, pkt))
            if rng.random() < 0.1:  # idle: a heartbeat with the next msg_seq
                packets.append(
                    encode_packet(
                        channel=CHANNEL,
                        adapter=adapter,
                        term=term,
                        first_seq=start + size,
                        blocks=[],
                        send_time_ns=0,
                    )
                )
        for i in range(len(packets) - 1):  # local reorders
            if rng.random() < 0.1:
                packets[i], packets[i + 1] = packets[i + 1], packets[i]
        per_line.append(packets)
    steps: list[Step] = []
    now = 0.0
    cursors = [0] * lines
    while any(cursors[line] < len(per_line[line]) for line in range(lines)):
        line = rng.choice([i for i in range(lines) if cursors[i] < len(per_line[i])])
        burst = rng.randint(1, 3)
        for pkt in per_line[line][cursors[line] : cursors[line] + burst]:
            now += rng.choice([0.0, 0.0, 0.001, 0.01, 0.03, 0.2])
            steps.append(("packet", line, pkt, now))
            if len(pkt) >= HEADER_SIZE and rng.random() < 0.02:  # a journal replay on its own line
                replay = pkt[:3] + bytes([pkt[3] | FLAG_RETRANSMISSION]) + pkt[4:]
                steps.append(("packet", lines, replay, now))
            if rng.random() < 0.1:
                now += rng.choice([0.02, 0.06, 0.6])
                steps.append(("timer", 0, b"", now))
        cursors[line] += burst
    steps.append(("timer", 0, b"", now + 1.0))
    return config, steps


def _key(event: Event) -> object:
    if isinstance(event, Delivery):
        return (
            "Delivery",
            event.channel,
            event.msg_seq,
            event.source_stream,
            event.source_seq,
            event.line,
            event.term,
            event.send_time_ns,
            event.payload,
        )
    return event  # frozen dataclasses compare by value


def _stats(stats: ArbiterStats) -> ArbiterStats:
    return stats


def run_both(config: ArbiterConfig, steps: list[Step], *, lines: int = 2) -> list[Event]:
    fast = ChannelArbiter(config, lines=lines)
    reference = ReferenceArbiter(config, lines=lines)
    delivered: list[Event] = []
    for number, (kind, line, pkt, now) in enumerate(steps):
        if kind == "packet":
            got, want = fast.on_packet(line, pkt, now=now), reference.on_packet(line, pkt, now=now)
        else:
            got, want = fast.on_timer(now=now), reference.on_timer(now=now)
        assert [_key(e) for e in got] == [_key(e) for e in want], f"step {number}"
        assert fast.next_deadline() == reference.next_deadline(), f"step {number}"
        assert fast.next_seq == reference.next_seq and fast.channel == reference.channel
        delivered += got
    # line_holes is newer than the reference: everything else must agree.
    assert replace(fast.stats(), line_holes=0) == reference.stats()
    assert repr(fast) == repr(reference)
    return delivered


@given(st.integers(0, 2**32))
@settings(max_examples=300, deadline=None)
def test_property_fast_path_matches_reference_on_two_lines(seed: int) -> None:
    config, steps = scenario(seed)
    run_both(config, steps)


@given(st.integers(0, 2**32))
@settings(max_examples=60, deadline=None)
def test_property_fast_path_matches_reference_on_one_and_three_lines(seed: int) -> None:
    lines = 1 + 2 * (seed % 2)
    config, steps = scenario(seed, lines=lines)
    run_both(config, steps, lines=lines)


@pytest.mark.parametrize("seed", range(40))
def test_fixed_seeds_match_reference(seed: int) -> None:
    # The same check on fixed seeds, so every run covers these cases.
    config, steps = scenario(seed)
    run_both(config, steps)


def test_clean_two_lines_take_the_fast_path_and_match_reference() -> None:
    # Active and backup cut the same stream differently; nothing lost.
    rng = random.Random(3)
    config = ArbiterConfig(channel=CHANNEL)
    streams = []
    for adapter, most in ((1, 60), (2, 45)):
        streams.append(
            [
                encode_packet(
                    channel=CHANNEL,
                    adapter=adapter,
                    term=1,
                    first_seq=start,
                    blocks=[(1, 500 + s, b"x" * rng.randint(20, 200)) for s in range(start, start + size)],
                    send_time_ns=adapter,
                )
                for start, size in _cut(rng, 1, 3000, most)
            ]
        )
    steps: list[Step] = []
    for i in range(max(map(len, streams))):
        for line, packets in enumerate(streams):
            if i < len(packets):
                steps.append(("packet", line, packets[i], i / 1000))
    delivered = run_both(config, steps)
    assert [e.msg_seq for e in delivered if isinstance(e, Delivery)] == list(range(1, 3001))
    fast = ChannelArbiter(config, lines=2)
    for _kind, line, pkt, now in steps:
        fast.on_packet(line, pkt, now=now)
    stats = fast.stats()
    assert (stats.delivered, stats.duplicates, stats.conflicts, stats.late, stats.garbage) == (
        3000,
        3000,
        0,
        0,
        0,
    )


def test_fast_path_delivery_behaves_like_a_constructed_one() -> None:
    packet = encode_packet(
        channel=CHANNEL, adapter=1, term=1, first_seq=1, blocks=[(1, 1, b"a"), (1, 2, b"")], send_time_ns=9
    )
    arb = ChannelArbiter(ArbiterConfig(channel=CHANNEL))
    arb.on_packet(
        0, encode_packet(channel=CHANNEL, adapter=1, term=1, first_seq=1, blocks=[], send_time_ns=0), now=0.0
    )
    events = arb.on_packet(0, packet, now=0.0)
    assert [type(e) for e in events] == [Delivery, Delivery]
    built = Delivery(CHANNEL, 1, 1, 1, 0, 1, 9, packet, HEADER_SIZE + 12, HEADER_SIZE + 13)
    for got in (events[0], built):
        assert (got.channel, got.msg_seq, got.source_stream, got.source_seq, got.line, got.term) == (
            CHANNEL,
            1,
            1,
            1,
            0,
            1,
        )
        assert got.payload == b"a" and repr(got) == repr(built)
    assert events[1].payload == b"" and events[1].update.symbol == ""
    assert events[1].update is events[1].update


@pytest.mark.parametrize("first", [1, 3])  # delivered in order, or a copy below the delivery point
def test_short_block_length_that_still_fills_the_packet_is_garbage(first: int) -> None:
    # Block 0 claims 4 bytes (below the 10 its own header needs), and block 1
    # starts right after them, so the walk ends exactly at the packet's end.
    good = encode_packet(
        channel=CHANNEL,
        adapter=1,
        term=1,
        first_seq=first,
        blocks=[(1, 7, b"x"), (1, 8, b"y")],
        send_time_ns=0,
    )
    block_1 = good[HEADER_SIZE + 13 :]
    bad = good[:HEADER_SIZE] + b"\x00\x04" + b"\x00\x01\x00\x00" + block_1
    start = encode_packet(channel=CHANNEL, adapter=1, term=1, first_seq=1, blocks=[], send_time_ns=0)
    steps: list[Step] = [("packet", 0, start, 0.0)]
    if first > 1:
        steps.append(
            (
                "packet",
                0,
                encode_packet(
                    channel=CHANNEL,
                    adapter=1,
                    term=1,
                    first_seq=1,
                    blocks=[(1, 5, b"a"), (1, 6, b"b"), (1, 7, b"c"), (1, 8, b"d")],
                    send_time_ns=0,
                ),
                0.0,
            )
        )
    steps.append(("packet", 1, bad, 0.0))
    run_both(ArbiterConfig(channel=CHANNEL), steps)
    fast = ChannelArbiter(ArbiterConfig(channel=CHANNEL), lines=2)
    for _kind, line, pkt, now in steps:
        fast.on_packet(line, pkt, now=now)
    assert fast.stats().garbage_reasons == {"length": 1}


# Names the reference needs that the test module does not otherwise use.
_ = (Conflict, EndOfSession, GapLost, LineStats, RetransmissionNeeded, TermChanged, PacketHeader, WireError)
_ = (bisect_right, deque, decode_blocks, decode_header)
