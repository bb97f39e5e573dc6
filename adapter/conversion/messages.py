"""The converted form of one source message: what the parser produces and conversion state applies.

Plain immutable values with no behaviour, shared by the parser
(:mod:`adapter.conversion.parser`), the conversion state
(:mod:`adapter.conversion.state`) and the protobuf codec
(:mod:`adapter.conversion.codec`), so none of them imports another for its types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, NamedTuple

__all__ = ["SourceMessage", "SourceUpdateEntry", "new_entry"]


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


# tuple.__new__ skips NamedTuple's Python-level __new__ on the hot path.
new_entry: Final = tuple.__new__


@dataclass(frozen=True, slots=True)
class SourceMessage:
    """One converted source message (one symbol).

    Attributes:
        source_seq: its gap-free number on its source stream (tag 34).
        symbol: the instrument.
        event_time_ns: the source's event time, ns since the epoch.
        entries: the converted entries, in message order.
        extra: the table's named derived values present in this message, in table order.
    """

    source_seq: int
    symbol: str
    event_time_ns: int
    entries: tuple[SourceUpdateEntry, ...]
    extra: tuple[tuple[str, float], ...] = ()
