"""The converted form of one source message: what the parser produces and conversion state applies.

Plain immutable values with no behaviour, shared by the parsers (each
format's, in ``adapter/formats/<name>/``), the conversion state
(:mod:`adapter.conversion.state`) and the protobuf codec
(:mod:`adapter.conversion.codec`), so none of them imports another for its types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, NamedTuple

__all__ = ["BookEntry", "SourceMessage", "SourceUpdateEntry", "SymbolEntries", "new_entry"]


class SourceUpdateEntry(NamedTuple):
    """One converted entry (immutable; a NamedTuple because it is built several times per message).

    Attributes:
        entry_type: a ``market_pb2.EntryType`` value.
        price: the price, after the table's converter and scale.
        size: the size.
        notional: derived by the table (``price * size`` for trades, 0 otherwise).
    """

    entry_type: int
    price: float
    size: int
    notional: float


class BookEntry(NamedTuple):
    """One market-data entry of a ``fix44`` message (docs/converters.md), checked by the parser.

    Attributes:
        action: ``279`` MDUpdateAction: 0 New, 1 Change, 2 Delete (0 in a full refresh).
        entry_type: ``269`` MDEntryType, as sent (``"0"`` bid, ``"1"`` offer, ``"2"`` trade ...).
        price: ``270``, or ``None`` when absent.
        size: ``271``, or ``None`` when absent.
        level: ``1023`` MDPriceLevel (from 1), or ``None``: the entry is price-keyed.
        orders: ``346`` NumberOfOrders (0 when absent).
    """

    action: int
    entry_type: str
    price: float | None
    size: float | None
    level: int | None
    orders: int


class SymbolEntries(NamedTuple):
    """The entries of one message for one symbol, in message order."""

    symbol: str
    entries: tuple[BookEntry, ...]


# tuple.__new__ skips NamedTuple's Python-level __new__ on the hot path.
new_entry: Final = tuple.__new__


@dataclass(frozen=True, slots=True)
class SourceMessage:
    """One converted source message: one symbol (``feedha-fix``), or the symbols it touches (``fix44``).

    Attributes:
        source_seq: its gap-free number on its source stream (tag 34).
        symbol: the instrument.
        event_time_ns: the source's event time, ns since the epoch.
        entries: the converted entries, in message order.
        extra: the table's named derived values present in this message, in table order.
        updates: ``fix44`` only: the entries of each symbol the message touches, in the order
            the symbols first appear (``symbol`` is then the first of them, ``entries`` empty).
        full_refresh: ``fix44`` only: a ``35=W`` (the symbol's book becomes exactly its entries).
    """

    source_seq: int
    symbol: str
    event_time_ns: int
    entries: tuple[SourceUpdateEntry, ...]
    extra: tuple[tuple[str, float], ...] = ()
    updates: tuple[SymbolEntries, ...] = ()
    full_refresh: bool = False
