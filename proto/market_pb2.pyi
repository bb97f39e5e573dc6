from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EntryType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENTRY_TYPE_UNSPECIFIED: _ClassVar[EntryType]
    ENTRY_TYPE_BID: _ClassVar[EntryType]
    ENTRY_TYPE_ASK: _ClassVar[EntryType]
    ENTRY_TYPE_TRADE: _ClassVar[EntryType]
ENTRY_TYPE_UNSPECIFIED: EntryType
ENTRY_TYPE_BID: EntryType
ENTRY_TYPE_ASK: EntryType
ENTRY_TYPE_TRADE: EntryType

class Entry(_message.Message):
    __slots__ = ("type", "price", "size", "notional")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PRICE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    NOTIONAL_FIELD_NUMBER: _ClassVar[int]
    type: EntryType
    price: float
    size: int
    notional: float
    def __init__(self, type: _Optional[_Union[EntryType, str]] = ..., price: _Optional[float] = ..., size: _Optional[int] = ..., notional: _Optional[float] = ...) -> None: ...

class SymbolState(_message.Message):
    __slots__ = ("volume", "high", "low", "last", "vwap", "trade_count", "bid", "ask", "notional")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    VWAP_FIELD_NUMBER: _ClassVar[int]
    TRADE_COUNT_FIELD_NUMBER: _ClassVar[int]
    BID_FIELD_NUMBER: _ClassVar[int]
    ASK_FIELD_NUMBER: _ClassVar[int]
    NOTIONAL_FIELD_NUMBER: _ClassVar[int]
    volume: int
    high: float
    low: float
    last: float
    vwap: float
    trade_count: int
    bid: float
    ask: float
    notional: float
    def __init__(self, volume: _Optional[int] = ..., high: _Optional[float] = ..., low: _Optional[float] = ..., last: _Optional[float] = ..., vwap: _Optional[float] = ..., trade_count: _Optional[int] = ..., bid: _Optional[float] = ..., ask: _Optional[float] = ..., notional: _Optional[float] = ...) -> None: ...

class MarketUpdate(_message.Message):
    __slots__ = ("symbol", "event_time_ns", "publish_time_ns", "entries", "state", "extra")
    class ExtraEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    SYMBOL_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_NS_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_TIME_NS_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    symbol: str
    event_time_ns: int
    publish_time_ns: int
    entries: _containers.RepeatedCompositeFieldContainer[Entry]
    state: SymbolState
    extra: _containers.ScalarMap[str, float]
    def __init__(self, symbol: _Optional[str] = ..., event_time_ns: _Optional[int] = ..., publish_time_ns: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[Entry, _Mapping]]] = ..., state: _Optional[_Union[SymbolState, _Mapping]] = ..., extra: _Optional[_Mapping[str, float]] = ...) -> None: ...

class Tombstone(_message.Message):
    __slots__ = ("symbol", "purge_id", "reason")
    SYMBOL_FIELD_NUMBER: _ClassVar[int]
    PURGE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    symbol: str
    purge_id: int
    reason: str
    def __init__(self, symbol: _Optional[str] = ..., purge_id: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...
