"""The delayed line: the journal's messages again, each once its publish time plus the delay has passed.

Theory of operation
-------------------
Users entitled to delayed data only get the channel's stream ``delay`` later
(15 minutes by default). Every adapter serves its own delayed line from its
own journal, so the delayed stream fails over like the real-time one: the
journals of a group agree on every ``msg_seq`` they hold (the output gate sees
to that), so the delayed lines are exact duplicates too, and a subscriber
arbitrates them the same way.

The shell tails the journal and feeds the records here (:meth:`DelayedLine.feed`)
while :meth:`DelayedLine.wants` says so: until the read-ahead holds a record due
beyond ``now + margin`` (or the journal's end), within a bound on memory. Each
turn, :meth:`DelayedLine.publish` sends every record whose ``time_ns + delay``
has passed, in ``msg_seq`` order -- so the records go out spaced as they were
first published -- in packets of the line's format with ``FLAG_DELAYED`` set,
same ``msg_seq``, same blocks; a purged message goes out as a tombstone block
in its place. An end-of-session record goes alone in its packet with the
end-of-session flag, as on the line, and is never a tombstone (a purge takes
messages away, never the session's end). An idle line sends heartbeats announcing the next ``msg_seq``
once it knows it.

The *frontier* (:meth:`DelayedLine.frontier`) is the last ``msg_seq`` the
delayed side is committed to: published, or due within ``margin``. A purge
must start beyond it; ``margin`` covers the other adapters' delayed lines,
which run a few milliseconds apart (their own publish times, their clocks).
The frontier is known only while the read-ahead reaches past ``now + margin``
or the journal's end: a tailer that is behind cannot say what is due.

Pure: the time comes in as arguments; records in, packets out.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Final

from feedha.adapter.core.purge import PurgeBook, purged_block
from feedha.adapter.core.records import RecordLike
from feedha.adapter.core.session import RECORD_SESSION_BOUNDARY
from feedha.proto import wire

__all__ = ["DEFAULT_DELAY_S", "DEFAULT_MARGIN_S", "DelayedCounters", "DelayedLine"]

DEFAULT_DELAY_S: Final = 900.0  # 15 minutes, the usual exchange delay for delayed data
DEFAULT_MARGIN_S: Final = 1.0  # a purge must start at least this long before its first message is due
MAX_BUFFERED: Final = 200_000  # read-ahead records held at most ...
MAX_BUFFERED_BYTES: Final = 64 * 1024 * 1024  # ... and bytes (then the tailer waits: bounded memory)
LATE_NS: Final = 100_000_000  # a record published this long after it was due counts as late


@dataclass(slots=True)
class DelayedCounters:
    """What the delayed line has done since start (status and metrics)."""

    read: int = 0  # records fed from the journal
    published: int = 0  # messages sent (tombstones included)
    tombstones: int = 0  # purged messages sent as tombstones
    packets: int = 0
    heartbeats: int = 0
    held: int = 0  # turns with due records held back (this backup lacked the group's purges)
    late: int = 0  # records sent more than LATE_NS after they were due (an overloaded adapter)
    max_late_ms: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class DelayedLine:
    """Schedules one adapter's delayed line.

    Args:
        channel: the channel number stamped on every packet.
        adapter: this adapter's number.
        delay_ns: how long after its publish time a message goes out.
        margin_ns: how long before it is due a message stops being purgeable.
        max_packet_bytes: the packet budget, header included.
        heartbeat_s: idle time after which a heartbeat is owed.
    """

    def __init__(
        self,
        *,
        channel: int,
        adapter: int,
        delay_ns: int,
        margin_ns: int,
        max_packet_bytes: int,
        heartbeat_s: float,
        max_buffered: int = MAX_BUFFERED,
        max_buffered_bytes: int = MAX_BUFFERED_BYTES,
    ) -> None:
        if delay_ns <= 0 or margin_ns < 0:
            raise ValueError(f"delay_ns must be > 0 and margin_ns >= 0, got {delay_ns}, {margin_ns}")
        self._channel, self._adapter = channel, adapter
        self.delay_ns, self.margin_ns = delay_ns, margin_ns
        self._max_packet_bytes = max_packet_bytes
        self._heartbeat_s = heartbeat_s
        self._limits = (max_buffered, max_buffered_bytes)
        self._buffer: deque[RecordLike] = deque()
        self._buffered_bytes = 0
        self._caught_up = False  # the last read reached the end of what the journal holds
        self.start_seq = 0  # where the tailer starts (set after a restart: what is due from now)
        self.read_seq = 0  # the last msg_seq fed
        self.published_seq = 0  # the last msg_seq the line carried (0: none)
        self._last_send = float("-inf")
        self.counters = DelayedCounters()

    def __repr__(self) -> str:
        return (
            f"<DelayedLine [delay={self.delay_ns / 1e9:g}s, published={self.published_seq}, "
            f"buffered={len(self._buffer)}, caught_up={self._caught_up}]>"
        )

    # ---- reading -----------------------------------------------------------------------

    def start_at(self, msg_seq: int) -> None:
        """Start the tailer at ``msg_seq`` (before anything was fed): what was due earlier is skipped."""
        self.start_seq = max(self.start_seq, msg_seq)

    def read_from(self) -> int:
        """The msg_seq the shell's tailer reads from next."""
        return max(self.read_seq + 1, self.start_seq)

    def wants(self, *, wall_ns: int) -> bool:
        """Whether the shell should read more records now (bounded read-ahead, see the module docstring)."""
        max_records, max_bytes = self._limits
        if len(self._buffer) >= max_records or self._buffered_bytes >= max_bytes:
            return False
        return not self._buffer or self._buffer[-1].time_ns + self.delay_ns <= wall_ns + self.margin_ns

    def feed(self, records: Iterable[RecordLike], *, caught_up: bool) -> None:
        """Records read from the journal, in msg_seq order (older than what was fed: ignored).

        Args:
            records: the records.
            caught_up: the read reached the end of what the journal holds now.
        """
        for record in records:
            if record.msg_seq <= self.read_seq or record.msg_seq < self.start_seq:
                continue
            self._buffer.append(record)
            self._buffered_bytes += len(record.payload)
            self.read_seq = record.msg_seq
            self.counters.read += 1
        self._caught_up = caught_up

    # ---- what the delayed side is committed to ---------------------------------------------------

    def frontier(self, *, wall_ns: int) -> int | None:
        """The last msg_seq published or due within the margin; ``None`` while the tailer lags behind."""
        horizon = wall_ns + self.margin_ns
        buffer = self._buffer
        if not self._caught_up and not (buffer and buffer[-1].time_ns + self.delay_ns > horizon):
            return None
        committed = self.published_seq
        for record in buffer:
            if record.time_ns + self.delay_ns > horizon:
                break
            committed = record.msg_seq
        return committed

    def next_due_ns(self) -> int | None:
        """When the next buffered record is due (wall clock, ns), or ``None``."""
        return self._buffer[0].time_ns + self.delay_ns if self._buffer else None

    def next_seq(self) -> int | None:
        """What an idle line announces: the msg_seq after the last one it sent (``None``: nothing sent)."""
        return self.published_seq + 1 if self.published_seq else None

    # ---- sending -----------------------------------------------------------------------

    def publish(
        self, *, now: float, wall_ns: int, term: int, book: PurgeBook, may_publish: bool
    ) -> list[bytes]:
        """The packets due now: every record past its delay (tombstones for the purged), or a heartbeat.

        Args:
            now: the monotonic clock (heartbeat timing).
            wall_ns: the wall clock, ns since the epoch (the records' publish times are on it).
            term: this adapter's term, stamped on the packets.
            book: the purges this adapter holds.
            may_publish: False holds everything back (a backup that lacks the group's purges).
        """
        buffer = self._buffer
        due = bool(buffer) and buffer[0].time_ns + self.delay_ns <= wall_ns
        if due and not may_publish:
            self.counters.held += 1
            return []
        packets: list[bytes] = []
        builder = wire.PacketBuilder(self._max_packet_bytes)
        while buffer and buffer[0].time_ns + self.delay_ns <= wall_ns:
            record = buffer.popleft()
            self._buffered_bytes -= len(record.payload)
            boundary = record.flags & RECORD_SESSION_BOUNDARY
            stream, source_seq, payload = self._block(record, book)
            contiguous = record.msg_seq == builder.next_seq
            if builder.count and (boundary or not (contiguous and builder.fits(len(payload)))):
                packets.append(self._seal(builder, term, wall_ns))
            builder.add(record.msg_seq, stream, source_seq, payload)
            self.published_seq = record.msg_seq
            self._count_late(wall_ns - record.time_ns - self.delay_ns)
            if boundary:  # alone and flagged, as the line carried it
                packets.append(self._seal(builder, term, wall_ns, wire.FLAG_END_OF_SESSION))
        if builder.count:
            packets.append(self._seal(builder, term, wall_ns))
        if packets:
            self._last_send = now
        elif may_publish and now - self._last_send >= self._heartbeat_s:
            heartbeat = self._heartbeat(now, wall_ns, term)
            if heartbeat is not None:
                packets.append(heartbeat)
        return packets

    def _block(self, record: RecordLike, book: PurgeBook) -> tuple[int, int, bytes]:
        tombstone = purged_block(record, book)
        if tombstone is None:
            return record.source_stream, record.source_seq, record.payload
        self.counters.tombstones += 1
        return tombstone

    def _seal(self, builder: wire.PacketBuilder, term: int, wall_ns: int, extra: int = 0) -> bytes:
        self.counters.published += builder.count
        self.counters.packets += 1
        return builder.build(
            channel=self._channel,
            adapter=self._adapter,
            term=term,
            send_time_ns=wall_ns,
            flags=wire.FLAG_DELAYED | extra,
        )

    def _heartbeat(self, now: float, wall_ns: int, term: int) -> bytes | None:
        next_seq = self.next_seq()
        if next_seq is None:  # nothing known yet: announcing a guess would open a false gap
            return None
        self._last_send = now
        self.counters.heartbeats += 1
        return wire.encode_packet(
            channel=self._channel,
            adapter=self._adapter,
            term=term,
            first_seq=next_seq,
            blocks=(),
            send_time_ns=wall_ns,
            flags=wire.FLAG_DELAYED,
        )

    def _count_late(self, late_ns: int) -> None:
        if late_ns > LATE_NS:
            self.counters.late += 1
            self.counters.max_late_ms = max(self.counters.max_late_ms, late_ns / 1e6)

    def heartbeat_due(self) -> float:
        """When an idle delayed line owes its next heartbeat (monotonic clock)."""
        return self._last_send + self._heartbeat_s
