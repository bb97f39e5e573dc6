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

class Side(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SIDE_UNSPECIFIED: _ClassVar[Side]
    SIDE_BID: _ClassVar[Side]
    SIDE_ASK: _ClassVar[Side]

class BookAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BOOK_ACTION_UNSPECIFIED: _ClassVar[BookAction]
    BOOK_ACTION_INSERTED: _ClassVar[BookAction]
    BOOK_ACTION_CHANGED: _ClassVar[BookAction]
    BOOK_ACTION_DELETED: _ClassVar[BookAction]

class SessionReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_REASON_UNSPECIFIED: _ClassVar[SessionReason]
    SESSION_REASON_SCHEDULE: _ClassVar[SessionReason]
    SESSION_REASON_OPERATOR: _ClassVar[SessionReason]
ENTRY_TYPE_UNSPECIFIED: EntryType
ENTRY_TYPE_BID: EntryType
ENTRY_TYPE_ASK: EntryType
ENTRY_TYPE_TRADE: EntryType
SIDE_UNSPECIFIED: Side
SIDE_BID: Side
SIDE_ASK: Side
BOOK_ACTION_UNSPECIFIED: BookAction
BOOK_ACTION_INSERTED: BookAction
BOOK_ACTION_CHANGED: BookAction
BOOK_ACTION_DELETED: BookAction
SESSION_REASON_UNSPECIFIED: SessionReason
SESSION_REASON_SCHEDULE: SessionReason
SESSION_REASON_OPERATOR: SessionReason

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
    __slots__ = ("volume", "high", "low", "last", "vwap", "trade_count", "bid", "ask", "notional", "book", "session")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    VWAP_FIELD_NUMBER: _ClassVar[int]
    TRADE_COUNT_FIELD_NUMBER: _ClassVar[int]
    BID_FIELD_NUMBER: _ClassVar[int]
    ASK_FIELD_NUMBER: _ClassVar[int]
    NOTIONAL_FIELD_NUMBER: _ClassVar[int]
    BOOK_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    volume: int
    high: float
    low: float
    last: float
    vwap: float
    trade_count: int
    bid: float
    ask: float
    notional: float
    book: Book
    session: SessionValues
    def __init__(self, volume: _Optional[int] = ..., high: _Optional[float] = ..., low: _Optional[float] = ..., last: _Optional[float] = ..., vwap: _Optional[float] = ..., trade_count: _Optional[int] = ..., bid: _Optional[float] = ..., ask: _Optional[float] = ..., notional: _Optional[float] = ..., book: _Optional[_Union[Book, _Mapping]] = ..., session: _Optional[_Union[SessionValues, _Mapping]] = ...) -> None: ...

class BookLevel(_message.Message):
    __slots__ = ("price", "size", "orders")
    PRICE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    ORDERS_FIELD_NUMBER: _ClassVar[int]
    price: float
    size: float
    orders: int
    def __init__(self, price: _Optional[float] = ..., size: _Optional[float] = ..., orders: _Optional[int] = ...) -> None: ...

class Book(_message.Message):
    __slots__ = ("level_indexed", "depth", "bids", "asks", "orders")
    LEVEL_INDEXED_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    BIDS_FIELD_NUMBER: _ClassVar[int]
    ASKS_FIELD_NUMBER: _ClassVar[int]
    ORDERS_FIELD_NUMBER: _ClassVar[int]
    level_indexed: bool
    depth: int
    bids: _containers.RepeatedCompositeFieldContainer[BookLevel]
    asks: _containers.RepeatedCompositeFieldContainer[BookLevel]
    orders: bytes
    def __init__(self, level_indexed: _Optional[bool] = ..., depth: _Optional[int] = ..., bids: _Optional[_Iterable[_Union[BookLevel, _Mapping]]] = ..., asks: _Optional[_Iterable[_Union[BookLevel, _Mapping]]] = ..., orders: _Optional[bytes] = ...) -> None: ...

class SessionValues(_message.Message):
    __slots__ = ("volume", "last", "high", "low", "open", "close", "settle", "open_interest", "vwap", "notional", "traded", "trades")
    VOLUME_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    LOW_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    SETTLE_FIELD_NUMBER: _ClassVar[int]
    OPEN_INTEREST_FIELD_NUMBER: _ClassVar[int]
    VWAP_FIELD_NUMBER: _ClassVar[int]
    NOTIONAL_FIELD_NUMBER: _ClassVar[int]
    TRADED_FIELD_NUMBER: _ClassVar[int]
    TRADES_FIELD_NUMBER: _ClassVar[int]
    volume: float
    last: float
    high: float
    low: float
    open: float
    close: float
    settle: float
    open_interest: float
    vwap: float
    notional: float
    traded: float
    trades: int
    def __init__(self, volume: _Optional[float] = ..., last: _Optional[float] = ..., high: _Optional[float] = ..., low: _Optional[float] = ..., open: _Optional[float] = ..., close: _Optional[float] = ..., settle: _Optional[float] = ..., open_interest: _Optional[float] = ..., vwap: _Optional[float] = ..., notional: _Optional[float] = ..., traded: _Optional[float] = ..., trades: _Optional[int] = ...) -> None: ...

class BookChange(_message.Message):
    __slots__ = ("action", "side", "level", "price", "size", "orders")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    SIDE_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    PRICE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    ORDERS_FIELD_NUMBER: _ClassVar[int]
    action: BookAction
    side: Side
    level: int
    price: float
    size: float
    orders: int
    def __init__(self, action: _Optional[_Union[BookAction, str]] = ..., side: _Optional[_Union[Side, str]] = ..., level: _Optional[int] = ..., price: _Optional[float] = ..., size: _Optional[float] = ..., orders: _Optional[int] = ...) -> None: ...

class SymbolUpdate(_message.Message):
    __slots__ = ("symbol", "trades", "book_changes", "state", "orders", "levels", "book_replaced")
    SYMBOL_FIELD_NUMBER: _ClassVar[int]
    TRADES_FIELD_NUMBER: _ClassVar[int]
    BOOK_CHANGES_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ORDERS_FIELD_NUMBER: _ClassVar[int]
    LEVELS_FIELD_NUMBER: _ClassVar[int]
    BOOK_REPLACED_FIELD_NUMBER: _ClassVar[int]
    symbol: str
    trades: _containers.RepeatedCompositeFieldContainer[Entry]
    book_changes: _containers.RepeatedCompositeFieldContainer[BookChange]
    state: SymbolState
    orders: bytes
    levels: _containers.RepeatedCompositeFieldContainer[PriceLevel]
    book_replaced: bool
    def __init__(self, symbol: _Optional[str] = ..., trades: _Optional[_Iterable[_Union[Entry, _Mapping]]] = ..., book_changes: _Optional[_Iterable[_Union[BookChange, _Mapping]]] = ..., state: _Optional[_Union[SymbolState, _Mapping]] = ..., orders: _Optional[bytes] = ..., levels: _Optional[_Iterable[_Union[PriceLevel, _Mapping]]] = ..., book_replaced: _Optional[bool] = ...) -> None: ...

class PriceLevel(_message.Message):
    __slots__ = ("side", "price", "size", "orders", "deleted")
    SIDE_FIELD_NUMBER: _ClassVar[int]
    PRICE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    ORDERS_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    side: Side
    price: float
    size: float
    orders: int
    deleted: bool
    def __init__(self, side: _Optional[_Union[Side, str]] = ..., price: _Optional[float] = ..., size: _Optional[float] = ..., orders: _Optional[int] = ..., deleted: _Optional[bool] = ...) -> None: ...

class MarketUpdate(_message.Message):
    __slots__ = ("symbol", "event_time_ns", "publish_time_ns", "entries", "state", "extra", "session_boundary", "symbols")
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
    SESSION_BOUNDARY_FIELD_NUMBER: _ClassVar[int]
    SYMBOLS_FIELD_NUMBER: _ClassVar[int]
    symbol: str
    event_time_ns: int
    publish_time_ns: int
    entries: _containers.RepeatedCompositeFieldContainer[Entry]
    state: SymbolState
    extra: _containers.ScalarMap[str, float]
    session_boundary: SessionBoundary
    symbols: _containers.RepeatedCompositeFieldContainer[SymbolUpdate]
    def __init__(self, symbol: _Optional[str] = ..., event_time_ns: _Optional[int] = ..., publish_time_ns: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[Entry, _Mapping]]] = ..., state: _Optional[_Union[SymbolState, _Mapping]] = ..., extra: _Optional[_Mapping[str, float]] = ..., session_boundary: _Optional[_Union[SessionBoundary, _Mapping]] = ..., symbols: _Optional[_Iterable[_Union[SymbolUpdate, _Mapping]]] = ...) -> None: ...

class SessionBoundary(_message.Message):
    __slots__ = ("ended", "started", "boundary_time_ns", "reason")
    ENDED_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    BOUNDARY_TIME_NS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ended: int
    started: int
    boundary_time_ns: int
    reason: SessionReason
    def __init__(self, ended: _Optional[int] = ..., started: _Optional[int] = ..., boundary_time_ns: _Optional[int] = ..., reason: _Optional[_Union[SessionReason, str]] = ...) -> None: ...

class SymbolImage(_message.Message):
    __slots__ = ("symbol", "state")
    SYMBOL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    symbol: str
    state: SymbolState
    def __init__(self, symbol: _Optional[str] = ..., state: _Optional[_Union[SymbolState, _Mapping]] = ...) -> None: ...

class ImagePart(_message.Message):
    __slots__ = ("channel", "adapter", "msg_seq", "session", "session_start_ns", "part", "parts", "symbol_count", "symbols")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_FIELD_NUMBER: _ClassVar[int]
    MSG_SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_START_NS_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    SYMBOL_COUNT_FIELD_NUMBER: _ClassVar[int]
    SYMBOLS_FIELD_NUMBER: _ClassVar[int]
    channel: int
    adapter: int
    msg_seq: int
    session: int
    session_start_ns: int
    part: int
    parts: int
    symbol_count: int
    symbols: _containers.RepeatedCompositeFieldContainer[SymbolImage]
    def __init__(self, channel: _Optional[int] = ..., adapter: _Optional[int] = ..., msg_seq: _Optional[int] = ..., session: _Optional[int] = ..., session_start_ns: _Optional[int] = ..., part: _Optional[int] = ..., parts: _Optional[int] = ..., symbol_count: _Optional[int] = ..., symbols: _Optional[_Iterable[_Union[SymbolImage, _Mapping]]] = ...) -> None: ...

class Tombstone(_message.Message):
    __slots__ = ("symbol", "purge_id", "reason", "symbols")
    SYMBOL_FIELD_NUMBER: _ClassVar[int]
    PURGE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SYMBOLS_FIELD_NUMBER: _ClassVar[int]
    symbol: str
    purge_id: int
    reason: str
    symbols: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, symbol: _Optional[str] = ..., purge_id: _Optional[int] = ..., reason: _Optional[str] = ..., symbols: _Optional[_Iterable[str]] = ...) -> None: ...
