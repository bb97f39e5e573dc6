"""The conflated line's bytes: what a published packet changed, and an interval as packets.

Theory of operation
-------------------
The conflation book (:mod:`adapter.core.conflation`) is fed from the packets
the real-time line carried (:func:`note_packet`): each block's msg_seq with
the symbols its ``MarketUpdate`` touched and a reference into the packet,
parsed only when the interval closes and only for each symbol's last change. A
closed interval becomes packets (:class:`ConflatedOutput`): one block per
symbol in symbol order, ``source_stream`` :data:`~proto.wire.CONFLATED_STREAM`,
``source_seq`` the boundary's msg_seq, the payload one canonical encoding of
the symbol's state there (:func:`encode_state`: the conversion codec's
``SymbolState``, deterministic serialization, ``publish_time_ns`` the
boundary's time). Every adapter therefore sends the same blocks under the
same conf_seqs; the last packet of an interval carries ``FLAG_END_OF_INTERVAL``.

Pure: no clock, no socket.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeAlias

from google.protobuf.message import DecodeError

from feedha.adapter.conversion.codec import from_proto, to_proto
from feedha.adapter.core.conflation import Interval
from feedha.proto import market_pb2, wire

__all__ = ["ConflatedOutput", "Ref", "encode_state", "note_packet", "ref"]

_SYMBOL_TAG: Final = 0x0A  # MarketUpdate.symbol (field 1, length-delimited): written first
_FLAGS: Final = wire.FLAG_CONFLATED


Ref: TypeAlias = tuple[bytes, int, int, int]
"""Where a symbol's state at one msg_seq is: ``(packet, start, end, index)``, the published
payload ``packet[start:end]`` and its ``symbols`` index (-1: the update's own state)."""


def ref(payload: bytes, index: int = -1) -> Ref:
    """A reference to a payload on its own (tests, benchmarks)."""
    return (payload, 0, len(payload), index)


def note_packet(packet: bytes, note: Callable[[int, str, Ref], None]) -> int:
    """``note(msg_seq, symbol, ref)`` for every symbol each block of a real-time packet changed.

    End-of-session blocks and heartbeats change no symbol. Returns the last msg_seq noted (0: none).
    Nothing is copied: a ref points into the packet, parsed only if it is a symbol's last
    change when its interval closes.

    Raises:
        wire.WireError: the packet does not decode (never for the core's own packets).
        DecodeError: a payload that is not a MarketUpdate.
    """
    header = wire.decode_header(packet)
    if header.is_heartbeat:
        return 0
    msg_seq = header.first_seq - 1
    for _stream, _seq, start, stop in wire.decode_blocks(packet, header):
        msg_seq += 1
        # A plain MarketUpdate starts with its symbol: read it without parsing the message.
        if packet[start] == _SYMBOL_TAG and (size := packet[start + 1]) < 0x80 and start + 2 + size <= stop:
            try:
                note(msg_seq, packet[start + 2 : start + 2 + size].decode(), (packet, start, stop, -1))
                continue
            except UnicodeDecodeError:
                pass
        update = market_pb2.MarketUpdate.FromString(packet[start:stop])
        if update.symbol:
            note(msg_seq, update.symbol, (packet, start, stop, -1))
        for index, part in enumerate(update.symbols):
            if part.symbol:
                note(msg_seq, part.symbol, (packet, start, stop, index))
    return msg_seq


def encode_state(symbol: str, ref: Ref, *, time_ns: int) -> bytes:
    """The canonical conflated payload of ``symbol``: its state as ``ref`` holds it, stamped ``time_ns``.

    Raises:
        DecodeError: the referenced payload does not parse.
    """
    packet, start, end, index = ref
    update = market_pb2.MarketUpdate.FromString(packet[start:end])
    state = update.state if index < 0 else update.symbols[index].state
    out = market_pb2.MarketUpdate(symbol=symbol, publish_time_ns=time_ns)
    out.state.CopyFrom(to_proto(from_proto(state)))  # the codec's values: one encoding everywhere
    if state.HasField("book"):
        out.state.book.depth = state.book.depth
    return out.SerializeToString(deterministic=True)


class ConflatedOutput:
    """Packets of the conflated line of one adapter.

    Args:
        channel: the channel number in every header.
        adapter: this adapter's number.
        max_packet_bytes: the packet budget (a single block larger than it goes alone).
        heartbeat_s: idle time after which a heartbeat is owed.
    """

    def __init__(self, *, channel: int, adapter: int, max_packet_bytes: int, heartbeat_s: float) -> None:
        self._channel, self._adapter = channel, adapter
        self._budget = max_packet_bytes
        self._heartbeat_s = heartbeat_s
        self._last_send = float("-inf")
        self.next_conf_seq = 0  # 0: not known yet (nothing published, no boundary heard)
        self.packets = self.blocks = self.heartbeats = self.bad_payloads = 0

    def __repr__(self) -> str:
        return f"<ConflatedOutput [next_conf_seq={self.next_conf_seq}, packets={self.packets}]>"

    def interval(self, interval: Interval[Ref], *, term: int, now: float) -> list[bytes]:
        """Interval ``interval`` as packets, in conf_seq order (none when nothing changed in it)."""
        boundary = interval.boundary
        self.next_conf_seq = interval.next_conf_seq
        if not interval.entries:
            return []
        blocks: list[tuple[int, int, bytes]] = []
        for symbol, ref in interval.entries:
            try:
                payload = encode_state(symbol, ref, time_ns=boundary.time_ns)
            except (DecodeError, IndexError):
                self.bad_payloads += 1  # never for the core's own packets; the block stays empty
                payload = b""
            blocks.append((wire.CONFLATED_STREAM, boundary.msg_seq, payload))
        packets = self._pack(blocks, boundary.first_conf_seq, boundary.time_ns, term)
        self._last_send = now
        self.blocks += len(blocks)
        self.packets += len(packets)
        return packets

    def _pack(self, blocks: list[tuple[int, int, bytes]], first: int, time_ns: int, term: int) -> list[bytes]:
        groups: list[list[tuple[int, int, bytes]]] = [[]]
        size = wire.HEADER_SIZE
        for block in blocks:
            cost = wire.BLOCK_OVERHEAD + len(block[2])
            if groups[-1] and (size + cost > self._budget or len(groups[-1]) == wire.MAX_COUNT):
                groups.append([])
                size = wire.HEADER_SIZE
            groups[-1].append(block)
            size += cost
        out = []
        for i, group in enumerate(groups):
            flags = _FLAGS | (wire.FLAG_END_OF_INTERVAL if i == len(groups) - 1 else 0)
            out.append(
                wire.encode_packet(
                    channel=self._channel,
                    adapter=self._adapter,
                    term=term,
                    first_seq=first,
                    blocks=group,
                    send_time_ns=time_ns,
                    flags=flags,
                )
            )
            first += len(group)
        return out

    def heartbeat_due(self) -> float:
        """When an idle line owes its next heartbeat (monotonic clock)."""
        return self._last_send + self._heartbeat_s

    def heartbeat(self, *, term: int, now: float, wall_ns: int) -> bytes | None:
        """A heartbeat announcing the next conf_seq, if one is owed and that number is known."""
        if now < self.heartbeat_due() or not self.next_conf_seq:
            return None
        self._last_send = now
        self.heartbeats += 1
        return wire.encode_packet(
            channel=self._channel,
            adapter=self._adapter,
            term=term,
            first_seq=self.next_conf_seq,
            blocks=(),
            send_time_ns=wall_ns,
            flags=_FLAGS,
        )
