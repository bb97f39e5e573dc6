"""The sync bus codec: typed messages to ``SyncMessage`` bytes and back.

Theory of operation
-------------------
Adapters of a channel talk over the sync bus (``proto/sync.proto``). This
module is the only place that sees the protobuf objects: the core builds the
typed messages below and the runner sends ``encode_sync(msg)``; the runner
feeds ``decode_sync(bytes)`` to the core. Every message carries its
:class:`Sender` (adapter, term, role, send time). Pure: no sockets, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, NamedTuple, TypeAlias

from google.protobuf.message import DecodeError

from feedha.adapter.conversion.codec import from_proto, to_proto
from feedha.adapter.conversion.state import SymbolValues
from feedha.adapter.core.conflation import Boundary
from feedha.adapter.core.purge import PurgeEntry, purge_from_proto, purge_to_proto
from feedha.adapter.core.sync_types import Role
from feedha.adapter.errors import AdapterError
from feedha.proto import sync_pb2

__all__ = [
    "ConflateAck",
    "Failed",
    "GapAnswer",
    "GapQuery",
    "Handover",
    "Health",
    "PurgeAck",
    "Purges",
    "ReportParts",
    "Sender",
    "SessionAck",
    "Snapshot",
    "SnapshotRequest",
    "StreamState",
    "SyncDecodeError",
    "SyncMessage",
    "decode_sync",
    "encode_sync",
    "report_parts",
]

_ROLE_TO_PB: Final = {
    Role.ACTIVE: sync_pb2.ROLE_ACTIVE,
    Role.BACKUP: sync_pb2.ROLE_BACKUP,
    Role.FAILED: sync_pb2.ROLE_FAILED,
}
_ROLE_FROM_PB: Final = {value: key for key, value in _ROLE_TO_PB.items()}


class SyncDecodeError(AdapterError, ValueError):
    """A sync-bus frame that is not a well-formed SyncMessage of this channel."""


@dataclass(frozen=True, slots=True)
class Sender:
    """Who sent a sync message, in which role and term, and when (ns since the epoch)."""

    adapter: int
    term: int
    role: Role
    send_time_ns: int


@dataclass(frozen=True, slots=True)
class StreamState:
    """Where the sender's stream stands (the active's heartbeat).

    ``last_source_seq`` is the last source message it published, with the
    ``last_msg_seq`` it got and the conversion-state ``digest`` right after it
    (0: nothing published yet).
    """

    sender: Sender
    source_stream: int
    next_msg_seq: int
    next_source_seq: int
    last_source_seq: int
    last_msg_seq: int
    digest: int
    session: int = 0  # the sender's session (0: a sender that knows no sessions)
    session_after_source_seq: int = 0
    session_boundary_msg_seq: int = 0
    session_start_ns: int = 0
    proposed_session: int = 0  # a boundary the sender proposes (0: none), see adapter.core.session
    proposed_after_source_seq: int = 0
    proposed_time_ns: int = 0
    proposed_reason: int = 0
    session_reason: int = 0
    purge_seq: int = 0  # the highest purge_id the sender holds
    conflate_proposed: tuple[Boundary, ...] = ()  # conflation boundaries proposed, not committed
    conflate_committed_k: int = 0  # the last conflation interval the sender committed
    table_budget: int = 0  # the bytes the sender's conversion tables may count (0: not said)


@dataclass(frozen=True, slots=True)
class ConflateAck:
    """A backup holds every proposed conflation boundary up to ``k``."""

    sender: Sender
    k: int


@dataclass(frozen=True, slots=True)
class SessionAck:
    """A backup acknowledges the proposed boundary ``proposed_session`` at fence ``after_source_seq``.

    It converts nothing after ``max(after_source_seq, position)`` until the active settles it.
    """

    sender: Sender
    proposed_session: int
    after_source_seq: int
    position: int


@dataclass(frozen=True, slots=True)
class Health:
    """The sender's health figures and the score backups are ranked by."""

    sender: Sender
    score: float
    available_memory_mb: float
    cpu_percent: float
    error_count: int
    message_rate: float
    lag: int
    in_sync: bool
    desync_count: int
    published_msg_seq: int = 0
    purge_seq: int = 0  # every purge up to this id is held (the sender's ack)
    delayed_msg_seq: int = 0  # the last msg_seq its delayed line carried


@dataclass(frozen=True, slots=True)
class SnapshotRequest:
    """The sender asks ``target_adapter`` for its whole conversion state."""

    sender: Sender
    target_adapter: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The sender's whole conversion state right after ``source_seq``."""

    sender: Sender
    source_stream: int
    source_seq: int
    next_msg_seq: int
    symbols: Mapping[str, SymbolValues]
    session: int = 0  # the session the state belongs to, and where it began
    session_after_source_seq: int = 0
    session_boundary_msg_seq: int = 0
    session_start_ns: int = 0
    session_reason: int = 0


@dataclass(frozen=True, slots=True)
class Failed:
    """The sender takes itself off line (rule 5, or an operator failed it)."""

    sender: Sender
    reason: str


@dataclass(frozen=True, slots=True)
class Purges:
    """Purges from the active: one it just accepted, or those a backup lacks."""

    sender: Sender
    entries: tuple[PurgeEntry, ...]


@dataclass(frozen=True, slots=True)
class PurgeAck:
    """The sender holds every purge up to ``known_through`` (an ack; a request for more)."""

    sender: Sender
    known_through: int


@dataclass(frozen=True, slots=True)
class GapQuery:
    """The active missed source messages ``first``..``last`` and asks its backups whether they have them."""

    sender: Sender
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class GapAnswer:
    """A backup past the gap ``first``..``last``: whether it numbered any of those source messages."""

    sender: Sender
    first: int
    last: int
    has_messages: bool


@dataclass(frozen=True, slots=True)
class Handover:
    """The active steps down in favour of ``target``, which has what the active missed."""

    sender: Sender
    target: int
    reason: str


MAX_PURGES_PER_MESSAGE: Final = 256
MAX_CONFLATE_PROPOSED: Final = 256  # conflation boundaries one report may name
MAX_REASON_CHARS: Final = 200

SyncMessage: TypeAlias = (
    StreamState
    | Health
    | SnapshotRequest
    | Snapshot
    | Failed
    | SessionAck
    | Purges
    | PurgeAck
    | GapQuery
    | GapAnswer
    | Handover
    | ConflateAck
)

_STREAM_SESSION_FIELDS: Final = (
    "session",
    "session_after_source_seq",
    "session_boundary_msg_seq",
    "session_start_ns",
    "proposed_session",
    "proposed_after_source_seq",
    "proposed_time_ns",
    "proposed_reason",
    "session_reason",
)
_SNAPSHOT_SESSION_FIELDS: Final = (*_STREAM_SESSION_FIELDS[:4], "session_reason")


def encode_sync(msg: SyncMessage, *, channel: int) -> bytes:
    """Serialize one typed message as a ``feedha.v1.SyncMessage`` of ``channel``."""
    sender = msg.sender
    out = sync_pb2.SyncMessage(
        channel=channel,
        adapter=sender.adapter,
        term=sender.term,
        role=_ROLE_TO_PB[sender.role],
        send_time_ns=sender.send_time_ns,
    )
    if isinstance(msg, StreamState):
        ss = out.stream_state
        ss.source_stream = msg.source_stream
        ss.next_msg_seq = msg.next_msg_seq
        ss.next_source_seq = msg.next_source_seq
        ss.last_source_seq = msg.last_source_seq
        ss.last_msg_seq = msg.last_msg_seq
        ss.digest = msg.digest
        for name in _STREAM_SESSION_FIELDS:
            setattr(ss, name, getattr(msg, name))
        ss.purge_seq = msg.purge_seq
        for boundary in msg.conflate_proposed:
            ss.conflate_proposed.add(
                k=boundary.k,
                msg_seq=boundary.msg_seq,
                time_ns=boundary.time_ns,
                first_conf_seq=boundary.first_conf_seq,
            )
        ss.conflate_committed_k = msg.conflate_committed_k
        ss.table_budget = msg.table_budget
    elif isinstance(msg, SessionAck):
        ack = out.session_ack
        ack.proposed_session = msg.proposed_session
        ack.after_source_seq = msg.after_source_seq
        ack.position = msg.position
    elif isinstance(msg, Health):
        _fill_health(out.health, msg)
    elif isinstance(msg, SnapshotRequest):
        out.snapshot_request.target_adapter = msg.target_adapter
    elif isinstance(msg, Snapshot):
        _fill_snapshot(out.snapshot, msg)
    elif isinstance(msg, Purges):
        for entry in msg.entries:
            purge_to_proto(entry, out.purges.entries.add())
    elif isinstance(msg, PurgeAck):
        out.purge_ack.known_through = msg.known_through
    elif isinstance(msg, GapQuery):
        out.gap_query.first_source_seq, out.gap_query.last_source_seq = msg.first, msg.last
    elif isinstance(msg, GapAnswer):
        answer = out.gap_answer
        answer.first_source_seq, answer.last_source_seq = msg.first, msg.last
        answer.has_messages = msg.has_messages
    elif isinstance(msg, Handover):
        out.handover.target_adapter = msg.target
        out.handover.reason = msg.reason[:MAX_REASON_CHARS]
    elif isinstance(msg, ConflateAck):
        out.conflate_ack.k = msg.k
    else:
        out.failed.reason = msg.reason
    return out.SerializeToString()


# The StreamState fields a report moves (2-6), which a sender of the fixed parts fills in.
_STREAM_POSITIONS: Final = ("next_msg_seq", "next_source_seq", "last_source_seq", "last_msg_seq", "digest")


class ReportParts(NamedTuple):
    """A :class:`StreamState` report's fixed parts, serialized, for a sender that fills in the rest.

    ``head`` is the ``SyncMessage`` fields before ``send_time_ns`` (channel, adapter, term,
    role), ``inner_head`` the ``StreamState`` field before the positions (``source_stream``),
    ``inner_tail`` those after them (the session fields, ``purge_seq``, the conflation fields).
    The report is ``head``, ``send_time_ns``, then the ``stream_state`` body: ``inner_head``,
    fields 2-6 (``next_msg_seq`` .. ``digest``), ``inner_tail``, in protobuf's order (by field
    number, zeros left out): byte for byte what :func:`encode_sync` makes of the whole message
    (the source pump's ``encode_report``).
    """

    head: bytes
    inner_head: bytes
    inner_tail: bytes


def report_parts(msg: StreamState, *, channel: int) -> ReportParts:
    """The fixed parts of reports like ``msg`` (its sender's time and positions are not in them)."""
    sender = msg.sender
    head = sync_pb2.SyncMessage(
        channel=channel, adapter=sender.adapter, term=sender.term, role=_ROLE_TO_PB[sender.role]
    )
    whole = sync_pb2.SyncMessage.FromString(encode_sync(msg, channel=channel)).stream_state
    inner_head = sync_pb2.StreamState(source_stream=whole.source_stream)
    for name in ("source_stream", *_STREAM_POSITIONS):
        whole.ClearField(name)
    return ReportParts(head.SerializeToString(), inner_head.SerializeToString(), whole.SerializeToString())


def _fill_health(health: sync_pb2.Health, msg: Health) -> None:
    health.score = msg.score
    health.available_memory_mb = msg.available_memory_mb
    health.cpu_percent = msg.cpu_percent
    health.error_count = msg.error_count
    health.message_rate = msg.message_rate
    health.lag = msg.lag
    health.in_sync = msg.in_sync
    health.desync_count = msg.desync_count
    health.published_msg_seq = msg.published_msg_seq
    health.purge_seq = msg.purge_seq
    health.delayed_msg_seq = msg.delayed_msg_seq


def _fill_snapshot(snap: sync_pb2.ConversionSnapshot, msg: Snapshot) -> None:
    snap.source_stream = msg.source_stream
    snap.source_seq = msg.source_seq
    snap.next_msg_seq = msg.next_msg_seq
    for name in _SNAPSHOT_SESSION_FIELDS:
        setattr(snap, name, getattr(msg, name))
    for symbol, values in msg.symbols.items():
        entry = snap.symbols.add()
        entry.symbol = symbol
        entry.state.CopyFrom(to_proto(values))


def decode_sync(data: bytes, *, channel: int) -> SyncMessage:
    """Parse one sync-bus frame.

    Raises:
        SyncDecodeError: not a SyncMessage, one of another channel, or one without a known role or body.
    """
    try:
        msg = sync_pb2.SyncMessage.FromString(data)
    except DecodeError as exc:
        raise SyncDecodeError(f"undecodable sync frame of {len(data)} bytes") from exc
    if msg.channel != channel:
        raise SyncDecodeError(f"sync frame of channel {msg.channel}, this is channel {channel}")
    role = _ROLE_FROM_PB.get(msg.role)
    if role is None:
        raise SyncDecodeError(f"sync frame with role {msg.role}")
    sender = Sender(msg.adapter, msg.term, role, msg.send_time_ns)
    decoder = _DECODERS.get(msg.WhichOneof("body") or "")
    if decoder is None:
        raise SyncDecodeError("sync frame without a body")
    return decoder(sender, msg)


def _stream_state(sender: Sender, msg: sync_pb2.SyncMessage) -> StreamState:
    ss = msg.stream_state
    return StreamState(
        sender,
        ss.source_stream,
        ss.next_msg_seq,
        ss.next_source_seq,
        ss.last_source_seq,
        ss.last_msg_seq,
        ss.digest,
        **{name: getattr(ss, name) for name in _STREAM_SESSION_FIELDS},
        purge_seq=ss.purge_seq,
        conflate_proposed=_conflate_proposed(ss),
        conflate_committed_k=ss.conflate_committed_k,
        table_budget=ss.table_budget,
    )


def _conflate_proposed(ss: sync_pb2.StreamState) -> tuple[Boundary, ...]:
    if len(ss.conflate_proposed) > MAX_CONFLATE_PROPOSED:
        raise SyncDecodeError(
            f"{len(ss.conflate_proposed)} conflation boundaries in one report "
            f"(at most {MAX_CONFLATE_PROPOSED})"
        )
    out = tuple(Boundary(b.k, b.msg_seq, b.time_ns, b.first_conf_seq) for b in ss.conflate_proposed)
    for boundary in out:
        if boundary.k < 1 or boundary.msg_seq < 1 or boundary.first_conf_seq < 1:
            raise SyncDecodeError(f"a conflation boundary with a zero field: {boundary}")
    return out


def _health(sender: Sender, msg: sync_pb2.SyncMessage) -> Health:
    h = msg.health
    return Health(
        sender,
        h.score,
        h.available_memory_mb,
        h.cpu_percent,
        h.error_count,
        h.message_rate,
        h.lag,
        h.in_sync,
        h.desync_count,
        h.published_msg_seq,
        h.purge_seq,
        h.delayed_msg_seq,
    )


def _snapshot(sender: Sender, msg: sync_pb2.SyncMessage) -> Snapshot:
    snap = msg.snapshot
    symbols = {entry.symbol: from_proto(entry.state) for entry in snap.symbols}
    session = {name: getattr(snap, name) for name in _SNAPSHOT_SESSION_FIELDS}
    return Snapshot(sender, snap.source_stream, snap.source_seq, snap.next_msg_seq, symbols, **session)


def _session_ack(sender: Sender, msg: sync_pb2.SyncMessage) -> SessionAck:
    ack = msg.session_ack
    return SessionAck(sender, ack.proposed_session, ack.after_source_seq, ack.position)


def _gap(sender: Sender, msg: sync_pb2.SyncMessage) -> GapQuery | GapAnswer:
    body = msg.gap_query if msg.WhichOneof("body") == "gap_query" else msg.gap_answer
    first, last = body.first_source_seq, body.last_source_seq
    if not 0 < first <= last:
        raise SyncDecodeError(f"a gap of source messages {first}..{last}")
    if isinstance(body, sync_pb2.GapQuery):
        return GapQuery(sender, first, last)
    return GapAnswer(sender, first, last, body.has_messages)


def _purge_entries(purges: sync_pb2.Purges) -> tuple[PurgeEntry, ...]:
    if len(purges.entries) > MAX_PURGES_PER_MESSAGE:
        raise SyncDecodeError(
            f"{len(purges.entries)} purges in one message (at most {MAX_PURGES_PER_MESSAGE})"
        )
    try:
        return tuple(purge_from_proto(entry) for entry in purges.entries)
    except ValueError as exc:
        raise SyncDecodeError(f"bad purge: {exc}") from exc


_DECODERS: Final[dict[str, Callable[[Sender, sync_pb2.SyncMessage], SyncMessage]]] = {
    "stream_state": _stream_state,
    "health": _health,
    "snapshot_request": lambda sender, msg: SnapshotRequest(sender, msg.snapshot_request.target_adapter),
    "snapshot": _snapshot,
    "failed": lambda sender, msg: Failed(sender, msg.failed.reason),
    "session_ack": _session_ack,
    "purges": lambda sender, msg: Purges(sender, _purge_entries(msg.purges)),
    "purge_ack": lambda sender, msg: PurgeAck(sender, msg.purge_ack.known_through),
    "gap_query": _gap,
    "gap_answer": _gap,
    "handover": lambda sender, msg: Handover(
        sender, msg.handover.target_adapter, msg.handover.reason[:MAX_REASON_CHARS]
    ),
    "conflate_ack": lambda sender, msg: ConflateAck(sender, msg.conflate_ack.k),
}
