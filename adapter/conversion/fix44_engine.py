"""The ``fix44`` conversion engine: FIX market data into order books (docs/converters.md).

:class:`BookState` is the conversion state (every symbol's
:class:`~adapter.conversion.state.SymbolValues` with its
:class:`~adapter.conversion.book.BookValues`, under the same digest, so the
sync rules, snapshots, checkpoints and images carry books unchanged).
:class:`Fix44Engine` converts runs in Python (the reference engine's loop)
and encodes one block per source message: a ``MarketUpdate`` with one
``SymbolUpdate`` per symbol the message touches. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from feedha.adapter.conversion._reference import ReferenceEngine
from feedha.adapter.conversion.book import ASK, BID, BookValues, apply_entries, book_changes
from feedha.adapter.conversion.codec import to_proto
from feedha.adapter.conversion.fix44_dictionary import Dictionary
from feedha.adapter.conversion.fix44_parser import Fix44Converter
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.conversion.state import (
    DIGEST_MASK,
    INT64_MAX,
    ConversionState,
    SymbolValues,
    symbol_digest,
)
from feedha.adapter.conversion.table import ConverterTable
from feedha.adapter.errors import ConversionError
from feedha.proto import market_pb2

__all__ = ["DEFAULT_BOOK_DEPTH", "BookState", "Fix44Engine"]

DEFAULT_BOOK_DEPTH: Final = 10
_TRADE: Final = market_pb2.ENTRY_TYPE_TRADE


class BookState(ConversionState):
    """Conversion state of ``fix44``: per symbol, the trade figures and the order book.

    Args:
        depth: the book depth (levels kept by a level-indexed book, levels shown).
    """

    __slots__ = ("depth",)

    def __init__(self, depth: int = DEFAULT_BOOK_DEPTH) -> None:
        super().__init__()
        self.depth = depth

    def stage(self, msg: SourceMessage) -> dict[str, SymbolValues]:
        """Every symbol's values after ``msg``, on copies (the state is unchanged).

        Raises:
            ConversionError: ``book_full`` or ``overflow``; nothing of the message is used.
        """
        staged: dict[str, SymbolValues] = {}
        for symbol, entries in msg.updates:
            values = self.get(symbol) or SymbolValues(book=BookValues())
            book = values.book if values.book is not None else BookValues()
            apply_entries(book, entries, depth=self.depth, full=msg.full_refresh)
            staged[symbol] = _summarize(values, book, symbol)
        return staged

    def commit(self, staged: Mapping[str, SymbolValues]) -> None:
        """Adopt what :meth:`stage` returned: its values are fresh copies, kept as they are."""
        for symbol, values in staged.items():
            old_hash = self._hashes.get(symbol, 0)
            new_hash = symbol_digest(symbol, values)
            self._values[symbol] = values
            self._hashes[symbol] = new_hash
            self._digest = (self._digest - old_hash + new_hash) & DIGEST_MASK

    def preview(self, msg: SourceMessage) -> SymbolValues:
        """The first symbol's values after ``msg`` (:meth:`stage` has them all)."""
        return self.stage(msg)[msg.symbol]

    def apply(self, msg: SourceMessage) -> SymbolValues:
        """Apply a whole message (every symbol it touches); the first symbol's values."""
        staged = self.stage(msg)
        self.commit(staged)
        return staged[msg.symbol]


def _summarize(values: SymbolValues, book: BookValues, symbol: str) -> SymbolValues:
    # The model's fixed fields follow the book: a feedha-fix subscriber reads them as before.
    volume = book.volume or 0.0
    if not volume <= INT64_MAX:
        raise ConversionError("overflow", f"volume of {symbol!r} leaves int64")
    values.book = book
    values.volume = int(volume)
    values.high, values.low = book.high or 0.0, book.low or 0.0
    values.last, values.vwap = book.last or 0.0, book.vwap or 0.0
    values.trade_count, values.notional = book.trades, book.notional
    values.bid, values.ask = book.best(BID), book.best(ASK)
    return values


class Fix44Engine(ReferenceEngine):
    """The ``fix44`` engine (Python).

    Args:
        dictionary: the checked data dictionary.
        depth: the book depth.
        securities: ``SecurityID`` (or ``SecurityIDSource:SecurityID``) -> symbol.
    """

    is_native = False

    def __init__(
        self,
        dictionary: Dictionary | None = None,
        *,
        depth: int = DEFAULT_BOOK_DEPTH,
        securities: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(ConverterTable.load())
        self.state = BookState(depth)
        self.fix44 = Fix44Converter(dictionary or Dictionary.load(), securities)
        self.depth = depth

    def parse(self, body: bytes) -> SourceMessage:
        """Convert one ``fix44`` message body (raises ``ConversionError``)."""
        return self.fix44.parse(body)

    def encode(self, msg: SourceMessage, values: SymbolValues, publish_time_ns: int) -> bytes:
        """One symbol's block (used only when a message touches one symbol)."""
        return self.encode_staged(msg, {msg.symbol: values}, publish_time_ns)

    def encode_staged(
        self, msg: SourceMessage, staged: Mapping[str, SymbolValues], publish_time_ns: int
    ) -> bytes:
        """The block of one message: a ``SymbolUpdate`` per symbol it touches."""
        update = market_pb2.MarketUpdate(event_time_ns=msg.event_time_ns, publish_time_ns=publish_time_ns)
        depth = self.depth
        for symbol, entries in msg.updates:
            values = staged[symbol]
            out = update.symbols.add(symbol=symbol)
            for entry in entries:
                if entry.entry_type == "2" and not msg.full_refresh and entry.action != 2:
                    price, size = entry.price or 0.0, entry.size or 0.0
                    out.trades.add(type=_TRADE, price=price, size=int(size), notional=price * size)
            before = self.state.peek(symbol)
            old = before.book if before is not None and before.book is not None else BookValues()
            book = values.book or BookValues()
            for side, old_levels, new_levels in ((BID, old.bids, book.bids), (ASK, old.asks, book.asks)):
                for change in book_changes(old_levels[:depth], new_levels[:depth], side):
                    out.book_changes.add(
                        action=change.action, side=change.side, level=change.level,
                        price=change.price, size=change.size, orders=change.orders,
                    )  # fmt: skip
            state = to_proto(values)
            state.book.depth = depth
            out.state.CopyFrom(state)
        return update.SerializeToString(deterministic=True)
