"""Sync-bus messages: building them from adapter state and reading them into events.

Pure: protobuf in and out, no sockets. The runner publishes what
``encode_*`` returns on its sync PUB socket and feeds what
:func:`decode_sync` returns into :mod:`adapter.sync`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from google.protobuf.message import DecodeError

from adapter.conversion import from_proto, to_proto
from adapter.sequencer import PositionReport, Sequencer
from adapter.state import SymbolValues
from adapter.sync import PeerHeard, Role, SyncState
from proto import sync_pb2

ROLE_TO_PB: Final = {
    Role.ACTIVE: sync_pb2.ROLE_ACTIVE,
    Role.BACKUP: sync_pb2.ROLE_BACKUP,
    Role.FAILED: sync_pb2.ROLE_FAILED,
}
ROLE_FROM_PB: Final = {value: key for key, value in ROLE_TO_PB.items()}


class SyncDecodeError(ValueError):
    """A sync-bus frame that is not a SyncMessage of this channel."""


def _envelope(state: SyncState, channel: int, send_time_ns: int) -> sync_pb2.SyncMessage:
    return sync_pb2.SyncMessage(
        channel=channel,
        adapter=state.adapter,
        term=state.term,
        role=ROLE_TO_PB[state.role],
        send_time_ns=send_time_ns,
    )


def encode_stream_state(
    state: SyncState, sequencer: Sequencer, *, channel: int, source_stream: int, send_time_ns: int
) -> bytes:
    """The active's heartbeat: where its stream stands."""
    msg = _envelope(state, channel, send_time_ns)
    ss = msg.stream_state
    ss.source_stream = source_stream
    ss.next_msg_seq = sequencer.next_msg_seq
    ss.next_source_seq = sequencer.next_source_seq
    ss.last_source_seq = sequencer.last_recorded_source_seq
    ss.last_msg_seq = sequencer.last_msg_seq
    ss.digest = sequencer.last_digest
    return msg.SerializeToString()


def encode_health(
    state: SyncState,
    *,
    channel: int,
    send_time_ns: int,
    available_memory_mb: float,
    cpu_percent: float,
    error_count: int,
    message_rate: float,
    lag: int,
) -> bytes:
    """Our health, sent by every adapter every health interval."""
    msg = _envelope(state, channel, send_time_ns)
    health = msg.health
    health.score = state.health_score
    health.available_memory_mb = available_memory_mb
    health.cpu_percent = cpu_percent
    health.error_count = error_count
    health.message_rate = message_rate
    health.lag = lag
    health.in_sync = state.is_in_sync
    health.desync_count = len(state.desyncs)
    return msg.SerializeToString()


def encode_snapshot_request(state: SyncState, *, channel: int, target: int, send_time_ns: int) -> bytes:
    msg = _envelope(state, channel, send_time_ns)
    msg.snapshot_request.target_adapter = target
    return msg.SerializeToString()


def encode_snapshot(
    state: SyncState,
    symbols: Mapping[str, SymbolValues],
    sequencer: Sequencer,
    *,
    channel: int,
    source_stream: int,
    send_time_ns: int,
) -> bytes:
    """The whole conversion state right after our last recorded source message."""
    msg = _envelope(state, channel, send_time_ns)
    snap = msg.snapshot
    snap.source_stream = source_stream
    snap.source_seq = sequencer.last_recorded_source_seq
    snap.next_msg_seq = sequencer.next_msg_seq
    for symbol, values in symbols.items():
        entry = snap.symbols.add()
        entry.symbol = symbol
        entry.state.CopyFrom(to_proto(values))
    return msg.SerializeToString()


def encode_failed(state: SyncState, *, channel: int, reason: str, send_time_ns: int) -> bytes:
    msg = _envelope(state, channel, send_time_ns)
    msg.failed.reason = reason
    return msg.SerializeToString()


def decode_sync(data: bytes, *, channel: int) -> sync_pb2.SyncMessage:
    """Parse a sync-bus frame.

    Raises:
        SyncDecodeError: not a SyncMessage, or one of another channel.
    """
    try:
        msg = sync_pb2.SyncMessage.FromString(data)
    except DecodeError as exc:
        raise SyncDecodeError(f"undecodable sync frame of {len(data)} bytes") from exc
    if msg.channel != channel:
        raise SyncDecodeError(f"sync frame of channel {msg.channel}, this is channel {channel}")
    if msg.role not in ROLE_FROM_PB:
        raise SyncDecodeError(f"sync frame with role {msg.role}")
    return msg


def peer_heard(msg: sync_pb2.SyncMessage) -> PeerHeard:
    """The PeerHeard event every sync message amounts to."""
    role = ROLE_FROM_PB[msg.role]
    if msg.WhichOneof("body") == "health":
        return PeerHeard(msg.adapter, role, msg.term, msg.health.score, msg.health.in_sync)
    return PeerHeard(msg.adapter, role, msg.term)


def position_report(msg: sync_pb2.SyncMessage) -> PositionReport | None:
    """The active's published position, if the message is stream state with one."""
    if msg.WhichOneof("body") != "stream_state" or msg.stream_state.last_source_seq == 0:
        return None
    ss = msg.stream_state
    return PositionReport(ss.last_source_seq, ss.last_msg_seq, ss.digest)


def snapshot_symbols(msg: sync_pb2.SyncMessage) -> dict[str, SymbolValues]:
    """The conversion state a snapshot message carries."""
    return {entry.symbol: from_proto(entry.state) for entry in msg.snapshot.symbols}
