from feedha.proto import market_pb2 as _market_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_ACTIVE: _ClassVar[Role]
    ROLE_BACKUP: _ClassVar[Role]
    ROLE_FAILED: _ClassVar[Role]
ROLE_UNSPECIFIED: Role
ROLE_ACTIVE: Role
ROLE_BACKUP: Role
ROLE_FAILED: Role

class StreamState(_message.Message):
    __slots__ = ("source_stream", "next_msg_seq", "next_source_seq", "last_source_seq", "last_msg_seq", "digest", "session", "session_after_source_seq", "session_boundary_msg_seq", "session_start_ns", "session_reason", "proposed_session", "proposed_after_source_seq", "proposed_time_ns", "proposed_reason", "purge_seq", "conflate_proposed", "conflate_committed_k", "table_budget")
    SOURCE_STREAM_FIELD_NUMBER: _ClassVar[int]
    NEXT_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    NEXT_SOURCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_SOURCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_AFTER_SOURCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_BOUNDARY_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_START_NS_FIELD_NUMBER: _ClassVar[int]
    SESSION_REASON_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_SESSION_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_AFTER_SOURCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_TIME_NS_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_REASON_FIELD_NUMBER: _ClassVar[int]
    PURGE_SEQ_FIELD_NUMBER: _ClassVar[int]
    CONFLATE_PROPOSED_FIELD_NUMBER: _ClassVar[int]
    CONFLATE_COMMITTED_K_FIELD_NUMBER: _ClassVar[int]
    TABLE_BUDGET_FIELD_NUMBER: _ClassVar[int]
    source_stream: int
    next_msg_seq: int
    next_source_seq: int
    last_source_seq: int
    last_msg_seq: int
    digest: int
    session: int
    session_after_source_seq: int
    session_boundary_msg_seq: int
    session_start_ns: int
    session_reason: _market_pb2.SessionReason
    proposed_session: int
    proposed_after_source_seq: int
    proposed_time_ns: int
    proposed_reason: _market_pb2.SessionReason
    purge_seq: int
    conflate_proposed: _containers.RepeatedCompositeFieldContainer[ConflateBoundary]
    conflate_committed_k: int
    table_budget: int
    def __init__(self, source_stream: _Optional[int] = ..., next_msg_seq: _Optional[int] = ..., next_source_seq: _Optional[int] = ..., last_source_seq: _Optional[int] = ..., last_msg_seq: _Optional[int] = ..., digest: _Optional[int] = ..., session: _Optional[int] = ..., session_after_source_seq: _Optional[int] = ..., session_boundary_msg_seq: _Optional[int] = ..., session_start_ns: _Optional[int] = ..., session_reason: _Optional[_Union[_market_pb2.SessionReason, str]] = ..., proposed_session: _Optional[int] = ..., proposed_after_source_seq: _Optional[int] = ..., proposed_time_ns: _Optional[int] = ..., proposed_reason: _Optional[_Union[_market_pb2.SessionReason, str]] = ..., purge_seq: _Optional[int] = ..., conflate_proposed: _Optional[_Iterable[_Union[ConflateBoundary, _Mapping]]] = ..., conflate_committed_k: _Optional[int] = ..., table_budget: _Optional[int] = ...) -> None: ...

class ConflateBoundary(_message.Message):
    __slots__ = ("k", "msg_seq", "time_ns", "first_conf_seq")
    K_FIELD_NUMBER: _ClassVar[int]
    MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    TIME_NS_FIELD_NUMBER: _ClassVar[int]
    FIRST_CONF_SEQ_FIELD_NUMBER: _ClassVar[int]
    k: int
    msg_seq: int
    time_ns: int
    first_conf_seq: int
    def __init__(self, k: _Optional[int] = ..., msg_seq: _Optional[int] = ..., time_ns: _Optional[int] = ..., first_conf_seq: _Optional[int] = ...) -> None: ...

class ConflateAck(_message.Message):
    __slots__ = ("k",)
    K_FIELD_NUMBER: _ClassVar[int]
    k: int
    def __init__(self, k: _Optional[int] = ...) -> None: ...

class SessionAck(_message.Message):
    __slots__ = ("proposed_session", "after_source_seq", "position")
    PROPOSED_SESSION_FIELD_NUMBER: _ClassVar[int]
    AFTER_SOURCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    proposed_session: int
    after_source_seq: int
    position: int
    def __init__(self, proposed_session: _Optional[int] = ..., after_source_seq: _Optional[int] = ..., position: _Optional[int] = ...) -> None: ...

class Health(_message.Message):
    __slots__ = ("score", "available_memory_mb", "cpu_percent", "error_count", "message_rate", "lag", "in_sync", "desync_count", "published_msg_seq", "purge_seq", "delayed_msg_seq")
    SCORE_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    CPU_PERCENT_FIELD_NUMBER: _ClassVar[int]
    ERROR_COUNT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_RATE_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_FIELD_NUMBER: _ClassVar[int]
    DESYNC_COUNT_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    PURGE_SEQ_FIELD_NUMBER: _ClassVar[int]
    DELAYED_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    score: float
    available_memory_mb: float
    cpu_percent: float
    error_count: int
    message_rate: float
    lag: int
    in_sync: bool
    desync_count: int
    published_msg_seq: int
    purge_seq: int
    delayed_msg_seq: int
    def __init__(self, score: _Optional[float] = ..., available_memory_mb: _Optional[float] = ..., cpu_percent: _Optional[float] = ..., error_count: _Optional[int] = ..., message_rate: _Optional[float] = ..., lag: _Optional[int] = ..., in_sync: _Optional[bool] = ..., desync_count: _Optional[int] = ..., published_msg_seq: _Optional[int] = ..., purge_seq: _Optional[int] = ..., delayed_msg_seq: _Optional[int] = ...) -> None: ...

class SnapshotRequest(_message.Message):
    __slots__ = ("target_adapter",)
    TARGET_ADAPTER_FIELD_NUMBER: _ClassVar[int]
    target_adapter: int
    def __init__(self, target_adapter: _Optional[int] = ...) -> None: ...

class SymbolSnapshot(_message.Message):
    __slots__ = ("symbol", "state")
    SYMBOL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    symbol: str
    state: _market_pb2.SymbolState
    def __init__(self, symbol: _Optional[str] = ..., state: _Optional[_Union[_market_pb2.SymbolState, _Mapping]] = ...) -> None: ...

class ConversionSnapshot(_message.Message):
    __slots__ = ("source_stream", "source_seq", "next_msg_seq", "symbols", "session", "session_after_source_seq", "session_boundary_msg_seq", "session_start_ns", "session_reason", "purges")
    SOURCE_STREAM_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    NEXT_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    SYMBOLS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_AFTER_SOURCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_BOUNDARY_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_START_NS_FIELD_NUMBER: _ClassVar[int]
    SESSION_REASON_FIELD_NUMBER: _ClassVar[int]
    PURGES_FIELD_NUMBER: _ClassVar[int]
    source_stream: int
    source_seq: int
    next_msg_seq: int
    symbols: _containers.RepeatedCompositeFieldContainer[SymbolSnapshot]
    session: int
    session_after_source_seq: int
    session_boundary_msg_seq: int
    session_start_ns: int
    session_reason: _market_pb2.SessionReason
    purges: _containers.RepeatedCompositeFieldContainer[PurgeEntry]
    def __init__(self, source_stream: _Optional[int] = ..., source_seq: _Optional[int] = ..., next_msg_seq: _Optional[int] = ..., symbols: _Optional[_Iterable[_Union[SymbolSnapshot, _Mapping]]] = ..., session: _Optional[int] = ..., session_after_source_seq: _Optional[int] = ..., session_boundary_msg_seq: _Optional[int] = ..., session_start_ns: _Optional[int] = ..., session_reason: _Optional[_Union[_market_pb2.SessionReason, str]] = ..., purges: _Optional[_Iterable[_Union[PurgeEntry, _Mapping]]] = ...) -> None: ...

class PurgeEntry(_message.Message):
    __slots__ = ("purge_id", "first_msg_seq", "last_msg_seq", "time_ns", "reason", "issued_by", "term", "withdrawn")
    PURGE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    TIME_NS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ISSUED_BY_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    WITHDRAWN_FIELD_NUMBER: _ClassVar[int]
    purge_id: int
    first_msg_seq: int
    last_msg_seq: int
    time_ns: int
    reason: str
    issued_by: str
    term: int
    withdrawn: bool
    def __init__(self, purge_id: _Optional[int] = ..., first_msg_seq: _Optional[int] = ..., last_msg_seq: _Optional[int] = ..., time_ns: _Optional[int] = ..., reason: _Optional[str] = ..., issued_by: _Optional[str] = ..., term: _Optional[int] = ..., withdrawn: _Optional[bool] = ...) -> None: ...

class Purges(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[PurgeEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[PurgeEntry, _Mapping]]] = ...) -> None: ...

class PurgeAck(_message.Message):
    __slots__ = ("known_through",)
    KNOWN_THROUGH_FIELD_NUMBER: _ClassVar[int]
    known_through: int
    def __init__(self, known_through: _Optional[int] = ...) -> None: ...

class Failed(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class GapQuery(_message.Message):
    __slots__ = ("first_source_seq", "last_source_seq")
    FIRST_SOURCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_SOURCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    first_source_seq: int
    last_source_seq: int
    def __init__(self, first_source_seq: _Optional[int] = ..., last_source_seq: _Optional[int] = ...) -> None: ...

class GapAnswer(_message.Message):
    __slots__ = ("first_source_seq", "last_source_seq", "has_messages")
    FIRST_SOURCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_SOURCE_SEQ_FIELD_NUMBER: _ClassVar[int]
    HAS_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    first_source_seq: int
    last_source_seq: int
    has_messages: bool
    def __init__(self, first_source_seq: _Optional[int] = ..., last_source_seq: _Optional[int] = ..., has_messages: _Optional[bool] = ...) -> None: ...

class Handover(_message.Message):
    __slots__ = ("target_adapter", "reason")
    TARGET_ADAPTER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    target_adapter: int
    reason: str
    def __init__(self, target_adapter: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class SyncMessage(_message.Message):
    __slots__ = ("channel", "adapter", "term", "role", "send_time_ns", "stream_state", "health", "snapshot_request", "snapshot", "failed", "session_ack", "purges", "purge_ack", "gap_query", "gap_answer", "handover", "conflate_ack")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SEND_TIME_NS_FIELD_NUMBER: _ClassVar[int]
    STREAM_STATE_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_REQUEST_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    SESSION_ACK_FIELD_NUMBER: _ClassVar[int]
    PURGES_FIELD_NUMBER: _ClassVar[int]
    PURGE_ACK_FIELD_NUMBER: _ClassVar[int]
    GAP_QUERY_FIELD_NUMBER: _ClassVar[int]
    GAP_ANSWER_FIELD_NUMBER: _ClassVar[int]
    HANDOVER_FIELD_NUMBER: _ClassVar[int]
    CONFLATE_ACK_FIELD_NUMBER: _ClassVar[int]
    channel: int
    adapter: int
    term: int
    role: Role
    send_time_ns: int
    stream_state: StreamState
    health: Health
    snapshot_request: SnapshotRequest
    snapshot: ConversionSnapshot
    failed: Failed
    session_ack: SessionAck
    purges: Purges
    purge_ack: PurgeAck
    gap_query: GapQuery
    gap_answer: GapAnswer
    handover: Handover
    conflate_ack: ConflateAck
    def __init__(self, channel: _Optional[int] = ..., adapter: _Optional[int] = ..., term: _Optional[int] = ..., role: _Optional[_Union[Role, str]] = ..., send_time_ns: _Optional[int] = ..., stream_state: _Optional[_Union[StreamState, _Mapping]] = ..., health: _Optional[_Union[Health, _Mapping]] = ..., snapshot_request: _Optional[_Union[SnapshotRequest, _Mapping]] = ..., snapshot: _Optional[_Union[ConversionSnapshot, _Mapping]] = ..., failed: _Optional[_Union[Failed, _Mapping]] = ..., session_ack: _Optional[_Union[SessionAck, _Mapping]] = ..., purges: _Optional[_Union[Purges, _Mapping]] = ..., purge_ack: _Optional[_Union[PurgeAck, _Mapping]] = ..., gap_query: _Optional[_Union[GapQuery, _Mapping]] = ..., gap_answer: _Optional[_Union[GapAnswer, _Mapping]] = ..., handover: _Optional[_Union[Handover, _Mapping]] = ..., conflate_ack: _Optional[_Union[ConflateAck, _Mapping]] = ...) -> None: ...
