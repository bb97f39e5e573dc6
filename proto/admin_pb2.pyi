import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AdapterRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ADAPTER_ROLE_UNSPECIFIED: _ClassVar[AdapterRole]
    ADAPTER_ROLE_ACTIVE: _ClassVar[AdapterRole]
    ADAPTER_ROLE_BACKUP: _ClassVar[AdapterRole]
    ADAPTER_ROLE_FAILED: _ClassVar[AdapterRole]

class SyncStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SYNC_STATUS_UNSPECIFIED: _ClassVar[SyncStatus]
    SYNC_STATUS_IN_SYNC: _ClassVar[SyncStatus]
    SYNC_STATUS_SYNCING: _ClassVar[SyncStatus]
    SYNC_STATUS_BEHIND: _ClassVar[SyncStatus]
    SYNC_STATUS_AHEAD: _ClassVar[SyncStatus]
    SYNC_STATUS_FAILED: _ClassVar[SyncStatus]

class CommandKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMMAND_KIND_UNSPECIFIED: _ClassVar[CommandKind]
    COMMAND_KIND_PROMOTE: _ClassVar[CommandKind]
    COMMAND_KIND_DEMOTE: _ClassVar[CommandKind]
    COMMAND_KIND_FAIL: _ClassVar[CommandKind]
    COMMAND_KIND_THROTTLE: _ClassVar[CommandKind]
    COMMAND_KIND_GRANT: _ClassVar[CommandKind]
    COMMAND_KIND_REVOKE: _ClassVar[CommandKind]
    COMMAND_KIND_SEAL: _ClassVar[CommandKind]
    COMMAND_KIND_PURGE: _ClassVar[CommandKind]
    COMMAND_KIND_SESSION_END: _ClassVar[CommandKind]

class EventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_KIND_UNSPECIFIED: _ClassVar[EventKind]
    EVENT_KIND_WATCHING: _ClassVar[EventKind]
    EVENT_KIND_REGISTERED: _ClassVar[EventKind]
    EVENT_KIND_CHANGED: _ClassVar[EventKind]
    EVENT_KIND_DOWN: _ClassVar[EventKind]
    EVENT_KIND_COMMAND: _ClassVar[EventKind]
    EVENT_KIND_SUBSCRIBE: _ClassVar[EventKind]
    EVENT_KIND_MODIFY: _ClassVar[EventKind]
    EVENT_KIND_CANCEL: _ClassVar[EventKind]
    EVENT_KIND_SEAL: _ClassVar[EventKind]
    EVENT_KIND_POLICY: _ClassVar[EventKind]
ADAPTER_ROLE_UNSPECIFIED: AdapterRole
ADAPTER_ROLE_ACTIVE: AdapterRole
ADAPTER_ROLE_BACKUP: AdapterRole
ADAPTER_ROLE_FAILED: AdapterRole
SYNC_STATUS_UNSPECIFIED: SyncStatus
SYNC_STATUS_IN_SYNC: SyncStatus
SYNC_STATUS_SYNCING: SyncStatus
SYNC_STATUS_BEHIND: SyncStatus
SYNC_STATUS_AHEAD: SyncStatus
SYNC_STATUS_FAILED: SyncStatus
COMMAND_KIND_UNSPECIFIED: CommandKind
COMMAND_KIND_PROMOTE: CommandKind
COMMAND_KIND_DEMOTE: CommandKind
COMMAND_KIND_FAIL: CommandKind
COMMAND_KIND_THROTTLE: CommandKind
COMMAND_KIND_GRANT: CommandKind
COMMAND_KIND_REVOKE: CommandKind
COMMAND_KIND_SEAL: CommandKind
COMMAND_KIND_PURGE: CommandKind
COMMAND_KIND_SESSION_END: CommandKind
EVENT_KIND_UNSPECIFIED: EventKind
EVENT_KIND_WATCHING: EventKind
EVENT_KIND_REGISTERED: EventKind
EVENT_KIND_CHANGED: EventKind
EVENT_KIND_DOWN: EventKind
EVENT_KIND_COMMAND: EventKind
EVENT_KIND_SUBSCRIBE: EventKind
EVENT_KIND_MODIFY: EventKind
EVENT_KIND_CANCEL: EventKind
EVENT_KIND_SEAL: EventKind
EVENT_KIND_POLICY: EventKind

class LoginRequest(_message.Message):
    __slots__ = ("key_id", "secret")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    secret: str
    def __init__(self, key_id: _Optional[str] = ..., secret: _Optional[str] = ...) -> None: ...

class LoginResponse(_message.Message):
    __slots__ = ("token", "expire_time", "user", "is_admin", "lifetime")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    IS_ADMIN_FIELD_NUMBER: _ClassVar[int]
    LIFETIME_FIELD_NUMBER: _ClassVar[int]
    token: str
    expire_time: _timestamp_pb2.Timestamp
    user: str
    is_admin: bool
    lifetime: _duration_pb2.Duration
    def __init__(self, token: _Optional[str] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., user: _Optional[str] = ..., is_admin: _Optional[bool] = ..., lifetime: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class AdapterRegistration(_message.Message):
    __slots__ = ("feed", "channel_name", "channel_number", "adapter_id", "line_endpoint", "replay_endpoint", "sync_endpoint", "role", "term", "curve_public_key", "delayed_line_endpoint", "input_format", "conflated_line_endpoint")
    FEED_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_NAME_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_ID_FIELD_NUMBER: _ClassVar[int]
    LINE_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    REPLAY_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    SYNC_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    CURVE_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    DELAYED_LINE_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    INPUT_FORMAT_FIELD_NUMBER: _ClassVar[int]
    CONFLATED_LINE_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    feed: str
    channel_name: str
    channel_number: int
    adapter_id: str
    line_endpoint: str
    replay_endpoint: str
    sync_endpoint: str
    role: AdapterRole
    term: int
    curve_public_key: str
    delayed_line_endpoint: str
    input_format: str
    conflated_line_endpoint: str
    def __init__(self, feed: _Optional[str] = ..., channel_name: _Optional[str] = ..., channel_number: _Optional[int] = ..., adapter_id: _Optional[str] = ..., line_endpoint: _Optional[str] = ..., replay_endpoint: _Optional[str] = ..., sync_endpoint: _Optional[str] = ..., role: _Optional[_Union[AdapterRole, str]] = ..., term: _Optional[int] = ..., curve_public_key: _Optional[str] = ..., delayed_line_endpoint: _Optional[str] = ..., input_format: _Optional[str] = ..., conflated_line_endpoint: _Optional[str] = ...) -> None: ...

class AdapterStatus(_message.Message):
    __slots__ = ("role", "term", "next_msg_seq", "sync_status", "health_score", "lag")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    NEXT_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    SYNC_STATUS_FIELD_NUMBER: _ClassVar[int]
    HEALTH_SCORE_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    role: AdapterRole
    term: int
    next_msg_seq: int
    sync_status: SyncStatus
    health_score: float
    lag: int
    def __init__(self, role: _Optional[_Union[AdapterRole, str]] = ..., term: _Optional[int] = ..., next_msg_seq: _Optional[int] = ..., sync_status: _Optional[_Union[SyncStatus, str]] = ..., health_score: _Optional[float] = ..., lag: _Optional[int] = ...) -> None: ...

class PurgeResult(_message.Message):
    __slots__ = ("purge_id", "first_msg_seq", "last_msg_seq", "confirmed_adapters", "unconfirmed_adapters", "frontier_msg_seq", "last_msg_seq_journaled")
    PURGE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_ADAPTERS_FIELD_NUMBER: _ClassVar[int]
    UNCONFIRMED_ADAPTERS_FIELD_NUMBER: _ClassVar[int]
    FRONTIER_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_MSG_SEQ_JOURNALED_FIELD_NUMBER: _ClassVar[int]
    purge_id: int
    first_msg_seq: int
    last_msg_seq: int
    confirmed_adapters: _containers.RepeatedScalarFieldContainer[int]
    unconfirmed_adapters: _containers.RepeatedScalarFieldContainer[int]
    frontier_msg_seq: int
    last_msg_seq_journaled: int
    def __init__(self, purge_id: _Optional[int] = ..., first_msg_seq: _Optional[int] = ..., last_msg_seq: _Optional[int] = ..., confirmed_adapters: _Optional[_Iterable[int]] = ..., unconfirmed_adapters: _Optional[_Iterable[int]] = ..., frontier_msg_seq: _Optional[int] = ..., last_msg_seq_journaled: _Optional[int] = ...) -> None: ...

class CommandResult(_message.Message):
    __slots__ = ("command_id", "ok", "error_reason", "message", "purge")
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PURGE_FIELD_NUMBER: _ClassVar[int]
    command_id: str
    ok: bool
    error_reason: str
    message: str
    purge: PurgeResult
    def __init__(self, command_id: _Optional[str] = ..., ok: _Optional[bool] = ..., error_reason: _Optional[str] = ..., message: _Optional[str] = ..., purge: _Optional[_Union[PurgeResult, _Mapping]] = ...) -> None: ...

class ConnectRequest(_message.Message):
    __slots__ = ("registration", "status", "result")
    REGISTRATION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    registration: AdapterRegistration
    status: AdapterStatus
    result: CommandResult
    def __init__(self, registration: _Optional[_Union[AdapterRegistration, _Mapping]] = ..., status: _Optional[_Union[AdapterStatus, _Mapping]] = ..., result: _Optional[_Union[CommandResult, _Mapping]] = ...) -> None: ...

class ConnectResponse(_message.Message):
    __slots__ = ("command",)
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    command: OperatorCommand
    def __init__(self, command: _Optional[_Union[OperatorCommand, _Mapping]] = ...) -> None: ...

class OperatorCommand(_message.Message):
    __slots__ = ("kind", "term", "rate", "reason", "issued_by", "grants", "replace_grants", "seal_key", "command_id", "purge", "force")
    KIND_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ISSUED_BY_FIELD_NUMBER: _ClassVar[int]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    REPLACE_GRANTS_FIELD_NUMBER: _ClassVar[int]
    SEAL_KEY_FIELD_NUMBER: _ClassVar[int]
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    PURGE_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    kind: CommandKind
    term: int
    rate: float
    reason: str
    issued_by: str
    grants: _containers.RepeatedCompositeFieldContainer[AccessGrant]
    replace_grants: bool
    seal_key: SealKey
    command_id: str
    purge: PurgeRange
    force: bool
    def __init__(self, kind: _Optional[_Union[CommandKind, str]] = ..., term: _Optional[int] = ..., rate: _Optional[float] = ..., reason: _Optional[str] = ..., issued_by: _Optional[str] = ..., grants: _Optional[_Iterable[_Union[AccessGrant, _Mapping]]] = ..., replace_grants: _Optional[bool] = ..., seal_key: _Optional[_Union[SealKey, _Mapping]] = ..., command_id: _Optional[str] = ..., purge: _Optional[_Union[PurgeRange, _Mapping]] = ..., force: _Optional[bool] = ...) -> None: ...

class PurgeRange(_message.Message):
    __slots__ = ("first_msg_seq", "last_msg_seq", "all_pending")
    FIRST_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    ALL_PENDING_FIELD_NUMBER: _ClassVar[int]
    first_msg_seq: int
    last_msg_seq: int
    all_pending: bool
    def __init__(self, first_msg_seq: _Optional[int] = ..., last_msg_seq: _Optional[int] = ..., all_pending: _Optional[bool] = ...) -> None: ...

class SealKey(_message.Message):
    __slots__ = ("key_id", "key")
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    key_id: int
    key: bytes
    def __init__(self, key_id: _Optional[int] = ..., key: _Optional[bytes] = ...) -> None: ...

class AccessGrant(_message.Message):
    __slots__ = ("curve_public_key", "expire_time", "delayed_only", "conflated_only", "owner")
    CURVE_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    DELAYED_ONLY_FIELD_NUMBER: _ClassVar[int]
    CONFLATED_ONLY_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    curve_public_key: str
    expire_time: _timestamp_pb2.Timestamp
    delayed_only: bool
    conflated_only: bool
    owner: str
    def __init__(self, curve_public_key: _Optional[str] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., delayed_only: _Optional[bool] = ..., conflated_only: _Optional[bool] = ..., owner: _Optional[str] = ...) -> None: ...

class Line(_message.Message):
    __slots__ = ("adapter_id", "line_endpoint", "replay_endpoint", "role", "term", "is_up", "curve_server_key", "conflated_line_endpoint")
    ADAPTER_ID_FIELD_NUMBER: _ClassVar[int]
    LINE_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    REPLAY_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    IS_UP_FIELD_NUMBER: _ClassVar[int]
    CURVE_SERVER_KEY_FIELD_NUMBER: _ClassVar[int]
    CONFLATED_LINE_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    adapter_id: str
    line_endpoint: str
    replay_endpoint: str
    role: AdapterRole
    term: int
    is_up: bool
    curve_server_key: str
    conflated_line_endpoint: str
    def __init__(self, adapter_id: _Optional[str] = ..., line_endpoint: _Optional[str] = ..., replay_endpoint: _Optional[str] = ..., role: _Optional[_Union[AdapterRole, str]] = ..., term: _Optional[int] = ..., is_up: _Optional[bool] = ..., curve_server_key: _Optional[str] = ..., conflated_line_endpoint: _Optional[str] = ...) -> None: ...

class ChannelRoute(_message.Message):
    __slots__ = ("feed", "channel_name", "channel_number", "source_stream", "message_model", "lines", "symbols", "delayed", "seal_keys", "model_version", "model_descriptor_set", "conflated")
    FEED_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_NAME_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_NUMBER_FIELD_NUMBER: _ClassVar[int]
    SOURCE_STREAM_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_MODEL_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    SYMBOLS_FIELD_NUMBER: _ClassVar[int]
    DELAYED_FIELD_NUMBER: _ClassVar[int]
    SEAL_KEYS_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_DESCRIPTOR_SET_FIELD_NUMBER: _ClassVar[int]
    CONFLATED_FIELD_NUMBER: _ClassVar[int]
    feed: str
    channel_name: str
    channel_number: int
    source_stream: str
    message_model: str
    lines: _containers.RepeatedCompositeFieldContainer[Line]
    symbols: _containers.RepeatedScalarFieldContainer[str]
    delayed: bool
    seal_keys: _containers.RepeatedCompositeFieldContainer[SealKey]
    model_version: str
    model_descriptor_set: bytes
    conflated: bool
    def __init__(self, feed: _Optional[str] = ..., channel_name: _Optional[str] = ..., channel_number: _Optional[int] = ..., source_stream: _Optional[str] = ..., message_model: _Optional[str] = ..., lines: _Optional[_Iterable[_Union[Line, _Mapping]]] = ..., symbols: _Optional[_Iterable[str]] = ..., delayed: _Optional[bool] = ..., seal_keys: _Optional[_Iterable[_Union[SealKey, _Mapping]]] = ..., model_version: _Optional[str] = ..., model_descriptor_set: _Optional[bytes] = ..., conflated: _Optional[bool] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("symbols", "curve_public_key")
    SYMBOLS_FIELD_NUMBER: _ClassVar[int]
    CURVE_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    symbols: _containers.RepeatedScalarFieldContainer[str]
    curve_public_key: str
    def __init__(self, symbols: _Optional[_Iterable[str]] = ..., curve_public_key: _Optional[str] = ...) -> None: ...

class SubscribeResponse(_message.Message):
    __slots__ = ("subscription_id", "routes")
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    subscription_id: str
    routes: _containers.RepeatedCompositeFieldContainer[ChannelRoute]
    def __init__(self, subscription_id: _Optional[str] = ..., routes: _Optional[_Iterable[_Union[ChannelRoute, _Mapping]]] = ...) -> None: ...

class ModifyRequest(_message.Message):
    __slots__ = ("subscription_id", "symbols")
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    SYMBOLS_FIELD_NUMBER: _ClassVar[int]
    subscription_id: str
    symbols: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, subscription_id: _Optional[str] = ..., symbols: _Optional[_Iterable[str]] = ...) -> None: ...

class ModifyResponse(_message.Message):
    __slots__ = ("subscription_id", "routes")
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    subscription_id: str
    routes: _containers.RepeatedCompositeFieldContainer[ChannelRoute]
    def __init__(self, subscription_id: _Optional[str] = ..., routes: _Optional[_Iterable[_Union[ChannelRoute, _Mapping]]] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ("subscription_id",)
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    subscription_id: str
    def __init__(self, subscription_id: _Optional[str] = ...) -> None: ...

class CancelResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WatchRoutesRequest(_message.Message):
    __slots__ = ("subscription_id",)
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    subscription_id: str
    def __init__(self, subscription_id: _Optional[str] = ...) -> None: ...

class WatchRoutesResponse(_message.Message):
    __slots__ = ("subscription_id", "cause", "detail", "routes")
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    subscription_id: str
    cause: EventKind
    detail: str
    routes: _containers.RepeatedCompositeFieldContainer[ChannelRoute]
    def __init__(self, subscription_id: _Optional[str] = ..., cause: _Optional[_Union[EventKind, str]] = ..., detail: _Optional[str] = ..., routes: _Optional[_Iterable[_Union[ChannelRoute, _Mapping]]] = ...) -> None: ...

class AdapterInfo(_message.Message):
    __slots__ = ("registration", "status", "is_up", "update_time")
    REGISTRATION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    IS_UP_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    registration: AdapterRegistration
    status: AdapterStatus
    is_up: bool
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, registration: _Optional[_Union[AdapterRegistration, _Mapping]] = ..., status: _Optional[_Union[AdapterStatus, _Mapping]] = ..., is_up: _Optional[bool] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListAdaptersRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "channel_name")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_NAME_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    channel_name: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., channel_name: _Optional[str] = ...) -> None: ...

class ListAdaptersResponse(_message.Message):
    __slots__ = ("adapters", "next_page_token")
    ADAPTERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    adapters: _containers.RepeatedCompositeFieldContainer[AdapterInfo]
    next_page_token: str
    def __init__(self, adapters: _Optional[_Iterable[_Union[AdapterInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SubscriptionInfo(_message.Message):
    __slots__ = ("subscription_id", "user", "symbols", "create_time", "update_time")
    SUBSCRIPTION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    SYMBOLS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    subscription_id: str
    user: str
    symbols: _containers.RepeatedScalarFieldContainer[str]
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, subscription_id: _Optional[str] = ..., user: _Optional[str] = ..., symbols: _Optional[_Iterable[str]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListSubscriptionsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSubscriptionsResponse(_message.Message):
    __slots__ = ("subscriptions", "next_page_token")
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    subscriptions: _containers.RepeatedCompositeFieldContainer[SubscriptionInfo]
    next_page_token: str
    def __init__(self, subscriptions: _Optional[_Iterable[_Union[SubscriptionInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class FailoverRequest(_message.Message):
    __slots__ = ("channel_name", "to_adapter_id", "force")
    CHANNEL_NAME_FIELD_NUMBER: _ClassVar[int]
    TO_ADAPTER_ID_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    channel_name: str
    to_adapter_id: str
    force: bool
    def __init__(self, channel_name: _Optional[str] = ..., to_adapter_id: _Optional[str] = ..., force: _Optional[bool] = ...) -> None: ...

class CommandSent(_message.Message):
    __slots__ = ("adapter_id", "command")
    ADAPTER_ID_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    adapter_id: str
    command: OperatorCommand
    def __init__(self, adapter_id: _Optional[str] = ..., command: _Optional[_Union[OperatorCommand, _Mapping]] = ...) -> None: ...

class FailoverResponse(_message.Message):
    __slots__ = ("sent",)
    SENT_FIELD_NUMBER: _ClassVar[int]
    sent: _containers.RepeatedCompositeFieldContainer[CommandSent]
    def __init__(self, sent: _Optional[_Iterable[_Union[CommandSent, _Mapping]]] = ...) -> None: ...

class FailAdapterRequest(_message.Message):
    __slots__ = ("adapter_id", "reason")
    ADAPTER_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    adapter_id: str
    reason: str
    def __init__(self, adapter_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class FailAdapterResponse(_message.Message):
    __slots__ = ("sent",)
    SENT_FIELD_NUMBER: _ClassVar[int]
    sent: _containers.RepeatedCompositeFieldContainer[CommandSent]
    def __init__(self, sent: _Optional[_Iterable[_Union[CommandSent, _Mapping]]] = ...) -> None: ...

class ThrottleRequest(_message.Message):
    __slots__ = ("adapter_id", "rate")
    ADAPTER_ID_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    adapter_id: str
    rate: float
    def __init__(self, adapter_id: _Optional[str] = ..., rate: _Optional[float] = ...) -> None: ...

class ThrottleResponse(_message.Message):
    __slots__ = ("sent",)
    SENT_FIELD_NUMBER: _ClassVar[int]
    sent: _containers.RepeatedCompositeFieldContainer[CommandSent]
    def __init__(self, sent: _Optional[_Iterable[_Union[CommandSent, _Mapping]]] = ...) -> None: ...

class EndSessionRequest(_message.Message):
    __slots__ = ("channel_name", "reason")
    CHANNEL_NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    channel_name: str
    reason: str
    def __init__(self, channel_name: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class EndSessionResponse(_message.Message):
    __slots__ = ("sent",)
    SENT_FIELD_NUMBER: _ClassVar[int]
    sent: _containers.RepeatedCompositeFieldContainer[CommandSent]
    def __init__(self, sent: _Optional[_Iterable[_Union[CommandSent, _Mapping]]] = ...) -> None: ...

class PurgeRequest(_message.Message):
    __slots__ = ("channel_name", "first_msg_seq", "last_msg_seq", "all_pending", "reason")
    CHANNEL_NAME_FIELD_NUMBER: _ClassVar[int]
    FIRST_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    ALL_PENDING_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    channel_name: str
    first_msg_seq: int
    last_msg_seq: int
    all_pending: bool
    reason: str
    def __init__(self, channel_name: _Optional[str] = ..., first_msg_seq: _Optional[int] = ..., last_msg_seq: _Optional[int] = ..., all_pending: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class PurgeResponse(_message.Message):
    __slots__ = ("purge_id", "first_msg_seq", "last_msg_seq", "count", "adapter_id", "confirmed_adapter_ids", "unconfirmed_adapter_ids")
    PURGE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    LAST_MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_ADAPTER_IDS_FIELD_NUMBER: _ClassVar[int]
    UNCONFIRMED_ADAPTER_IDS_FIELD_NUMBER: _ClassVar[int]
    purge_id: int
    first_msg_seq: int
    last_msg_seq: int
    count: int
    adapter_id: str
    confirmed_adapter_ids: _containers.RepeatedScalarFieldContainer[str]
    unconfirmed_adapter_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, purge_id: _Optional[int] = ..., first_msg_seq: _Optional[int] = ..., last_msg_seq: _Optional[int] = ..., count: _Optional[int] = ..., adapter_id: _Optional[str] = ..., confirmed_adapter_ids: _Optional[_Iterable[str]] = ..., unconfirmed_adapter_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class WatchEventsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WatchEventsResponse(_message.Message):
    __slots__ = ("event_time", "kind", "channel_name", "adapter_id", "detail")
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_NAME_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_ID_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    event_time: _timestamp_pb2.Timestamp
    kind: EventKind
    channel_name: str
    adapter_id: str
    detail: str
    def __init__(self, event_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., kind: _Optional[_Union[EventKind, str]] = ..., channel_name: _Optional[str] = ..., adapter_id: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...
