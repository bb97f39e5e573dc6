"""A page of a time window: the journal's messages published in ``[start, end)``, packed as on the line.

The replay service (:mod:`adapter.replay`) answers a time-range request
(kind 4, :mod:`proto.replay`) one page at a time: the client asks for the
window after the last msg_seq it has, and the service reads from there (or
from where the journal's time index says the window starts), skips what was
published before ``start``, and packs the messages up to the reply's byte
budget. The page that reaches a message published at or after ``end`` -- or
the end of the journal once ``end`` has passed -- completes the window.

A packet holds messages of one publish time and its send time is that
publish time (on the line, the messages of one packet were published
together too): a client paces a replay by the packets' send times.

The client's requests are its flow control: the service holds nothing
between pages, so a client that reads slowly (a paced replay, a slow
consumer) costs the adapter one reply at a time, never a queue.

Pure: records in, packets out (the clock and the journal are the caller's).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from feedha.adapter.core.records import RecordLike
from feedha.adapter.core.session import RECORD_SESSION_BOUNDARY
from feedha.proto import wire
from feedha.proto.replay import MAX_PACKETS

__all__ = ["Page", "Window", "pack_window"]

logger = logging.getLogger(__name__)

# Seals the builder's blocks into a packet with these extra flags and this send time.
Seal = Callable[[wire.PacketBuilder, int, int], bytes]
# A record's block: (source_stream, source_seq, payload), a tombstone for a purged message.
BlockOf = Callable[[RecordLike], tuple[int, int, bytes]]


@dataclass(frozen=True, slots=True)
class Window:
    """What one page is asked for.

    Attributes:
        start_ns: the window's start (inclusive), ns since the Unix epoch.
        end_ns: its end (exclusive).
        after_seq: the last msg_seq of the window the client already has (0: none).
        now_ns: the service's clock: once past ``end_ns``, the journal's end ends the window.
        max_packet_bytes: one packet's budget, header included.
        max_bytes: the most packet bytes the page carries.
    """

    start_ns: int
    end_ns: int
    after_seq: int
    now_ns: int
    max_packet_bytes: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a window.

    Attributes:
        packets: the line packets (retransmission-flagged by the sealer).
        messages: the messages in them.
        through: the last msg_seq the page accounts for: the client's next ``after_seq``.
        complete: nothing of the window is after ``through``.
        newest_read: the last msg_seq read from the journal (``after_seq``: none).
        cut: the page was cut at its budget (more of the window follows).
        skipped_bytes: what the records read before the window's start would have taken
            as blocks (read, not sent: the service charges them to the asker).
    """

    packets: list[bytes]
    messages: int
    through: int
    complete: bool
    newest_read: int
    cut: bool
    skipped_bytes: int = 0


def pack_window(records: Iterable[RecordLike], window: Window, seal: Seal, block_of: BlockOf) -> Page:
    """Pack the records of ``window`` after ``window.after_seq`` into one page.

    Args:
        records: the journal's records in msg_seq order, from at or before the window's
            first message after ``after_seq`` (earlier ones are skipped).
        window: what is asked, the clock and the budgets.
        seal: builds a packet from the builder (with extra flags -- end of session -- and
            its messages' publish time as the send time).
        block_of: a record's block on the wire (a purged one's tombstone).

    Returns:
        The page.
    """
    packer = _Packer(window, seal)
    for record in records:
        if record.msg_seq <= window.after_seq:
            continue
        if record.time_ns >= window.end_ns:
            return packer.page(complete=True, cut=False)
        if not packer.take(record, block_of):
            return packer.page(complete=False, cut=True)
    return packer.page(complete=window.now_ns >= window.end_ns, cut=False)


class _Packer:
    """Packs records: a packet never spans a msg_seq hole or two publish times; a boundary goes alone."""

    def __init__(self, window: Window, seal: Seal) -> None:
        self._window = window
        self._seal = seal
        self._builder = wire.PacketBuilder(window.max_packet_bytes)
        self.packets: list[bytes] = []
        self._total = 0  # bytes of the packets sealed and of the open one
        self._messages = 0
        self._through = window.after_seq
        self._newest_read = window.after_seq
        self._time_ns = 0  # the open packet's publish time
        self._skipped = 0  # bytes of the records before the window's start

    def take(self, record: RecordLike, block_of: BlockOf) -> bool:
        """Pack ``record`` if it is in the window and fits (False: the page is full, not taken)."""
        builder = self._builder
        if record.time_ns < self._window.start_ns:  # before the window: accounted for, not sent
            self._newest_read = self._through = record.msg_seq
            self._skipped += wire.BLOCK_OVERHEAD + len(record.payload)
            return True
        stream, source_seq, payload = block_of(record)
        boundary = record.flags & RECORD_SESSION_BOUNDARY
        contiguous = builder.count and record.msg_seq == builder.first_seq + builder.count
        same_time = record.time_ns == self._time_ns
        if builder.count and (boundary or not contiguous or not same_time or not builder.fits(len(payload))):
            self._close(0)
        size = wire.BLOCK_OVERHEAD + len(payload) + (0 if builder.count else wire.HEADER_SIZE)
        full = self._total + size > self._window.max_bytes or len(self.packets) >= MAX_PACKETS
        if full and (self.packets or builder.count):
            return False
        builder.add(record.msg_seq, stream, source_seq, payload)
        self._time_ns = record.time_ns
        self._total += size
        self._messages += 1
        self._newest_read = self._through = record.msg_seq
        if boundary:  # the end-of-session block goes alone, flagged, as on the line
            self._close(wire.FLAG_END_OF_SESSION)
        return True

    def _close(self, extra: int) -> None:
        self.packets.append(self._seal(self._builder, extra, self._time_ns))

    def page(self, *, complete: bool, cut: bool) -> Page:
        """The page so far (sealing the open packet)."""
        if self._builder.count:
            self._close(0)
        return Page(
            self.packets, self._messages, self._through, complete, self._newest_read, cut, self._skipped
        )
