"""The line's output: the packet being filled, sealing it, idle heartbeats, injected drops.

Pure: the send time and the clock come in as arguments; sealing returns the
packet for the runner to send (or ``None`` when a drop is injected).
"""

from __future__ import annotations

from typing import Final

from feedha.proto import wire

__all__ = ["LineOutput"]

UNBOUNDED_ROOM: Final = 1 << 62  # room for a run when nothing is published (no packet to fill)


class LineOutput:
    """Builds the packets of one adapter's line.

    Blocks are added while the adapter has messages ready; :meth:`seal` closes
    the packet when it is full or when the adapter has nothing more right now,
    so batching never adds latency at low rates (docs/wire-format.md, "Rules a receiver can rely on").

    Args:
        channel: the channel number stamped on every packet.
        adapter: this adapter's number.
        max_packet_bytes: the packet budget, header included.
        heartbeat_s: idle time after which :meth:`heartbeat_due` says a heartbeat is owed.
    """

    __slots__ = (
        "_builder",
        "_channel",
        "_adapter",
        "_max_packet_bytes",
        "_heartbeat_s",
        "last_send",
        "packets",
        "heartbeats",
        "dropped_packets",
        "_drop_every",
        "_drop_left",
        "_drop_tick",
    )

    def __init__(self, *, channel: int, adapter: int, max_packet_bytes: int, heartbeat_s: float) -> None:
        self._builder = wire.PacketBuilder(max_packet_bytes)
        self._channel = channel
        self._adapter = adapter
        self._max_packet_bytes = max_packet_bytes
        self._heartbeat_s = heartbeat_s
        self.last_send = float("-inf")
        self.packets = self.heartbeats = self.dropped_packets = 0
        self._drop_every = self._drop_left = self._drop_tick = 0

    def __repr__(self) -> str:
        pending, packets, dropped = self._builder.count, self.packets, self.dropped_packets
        return f"<LineOutput [pending={pending}, packets={packets}, dropped={dropped}]>"

    # ---- filling ---------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Blocks in the packet being filled."""
        return self._builder.count

    def room(self) -> tuple[int, int]:
        """``(room, max_count)`` for the next run: bytes (negated when the packet is empty) and blocks."""
        return self._builder.room(), wire.MAX_COUNT - self._builder.count

    def fits(self, payload_len: int) -> bool:
        return self._builder.fits(payload_len)

    def add(self, msg_seq: int, source_stream: int, source_seq: int, payload: bytes) -> None:
        self._builder.add(msg_seq, source_stream, source_seq, payload)

    def add_blocks(self, first_msg_seq: int, count: int, blocks: bytes) -> None:
        self._builder.add_blocks(first_msg_seq, count, blocks)

    def discard(self) -> None:
        """Drop the packet being filled (the adapter stopped publishing; its journal has the messages)."""
        self._builder = wire.PacketBuilder(self._max_packet_bytes)

    # ---- sending ---------------------------------------------------------------------

    def seal(self, *, term: int, now: float, send_time_ns: int) -> bytes | None:
        """Close the packet being filled: its bytes, or ``None`` when empty or dropped on purpose."""
        if not self._builder.count:
            return None
        packet = self._builder.build(
            channel=self._channel, adapter=self._adapter, term=term, send_time_ns=send_time_ns
        )
        self.last_send = now
        if self._drop_left and self._drops_this_one():
            self.dropped_packets += 1
            return None
        self.packets += 1
        return packet

    def end_of_session(
        self,
        msg_seq: int,
        source_stream: int,
        source_seq: int,
        payload: bytes,
        *,
        term: int,
        now: float,
        send_time_ns: int,
    ) -> bytes:
        """The end-of-session packet: flag bit 2 and the one boundary block (never dropped on purpose)."""
        builder = wire.PacketBuilder(self._max_packet_bytes)
        builder.add(msg_seq, source_stream, source_seq, payload)
        self.last_send = now
        self.packets += 1
        return builder.build(
            channel=self._channel,
            adapter=self._adapter,
            term=term,
            send_time_ns=send_time_ns,
            flags=wire.FLAG_END_OF_SESSION,
        )

    @property
    def drops_injected(self) -> bool:
        """Whether packets are being dropped on purpose (fault injection, drills)."""
        return self._drop_left > 0

    def sent(self, packets: int, *, at: float) -> None:
        """``packets`` went out by another way (the source pump), the last at ``at`` (monotonic)."""
        self.packets += packets
        self.last_send = at

    def heartbeat_due(self) -> float:
        """When an idle line owes its next heartbeat."""
        return self.last_send + self._heartbeat_s

    def heartbeat(self, *, term: int, next_msg_seq: int, now: float, send_time_ns: int) -> bytes:
        """A heartbeat packet announcing ``next_msg_seq``."""
        self.last_send = now
        self.heartbeats += 1
        return wire.encode_packet(
            channel=self._channel,
            adapter=self._adapter,
            term=term,
            first_seq=next_msg_seq,
            blocks=(),
            send_time_ns=send_time_ns,
        )

    # ---- fault injection ---------------------------------------------------------------

    def inject_drops(self, *, every: int, count: int) -> None:
        """Skip sending every ``every``-th packet, ``count`` times (drills and tests)."""
        self._drop_every, self._drop_left, self._drop_tick = max(1, every), max(0, count), 0

    def _drops_this_one(self) -> bool:
        self._drop_tick += 1
        if self._drop_tick % self._drop_every:
            return False
        self._drop_left -= 1
        return True
