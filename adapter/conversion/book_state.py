"""The ``fix44`` conversion state: every symbol's values with its order book (docs/converters.md).

:class:`BookState` keeps every symbol's
:class:`~adapter.conversion.state.SymbolValues` with its
:class:`~adapter.conversion.book.BookValues`, under the same digest, so the
sync rules, snapshots, checkpoints and images carry books unchanged. The
engine that converts into it is :mod:`adapter.conversion.fix44_engine`. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from feedha.adapter.conversion.book import ASK, BID, BookValues, apply_entries
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.conversion.state import (
    DIGEST_MASK,
    INT64_MAX,
    ConversionState,
    SymbolValues,
    symbol_digest,
)
from feedha.adapter.errors import ConversionError

__all__ = ["DEFAULT_BOOK_DEPTH", "BookState"]

DEFAULT_BOOK_DEPTH: Final = 10


class BookState(ConversionState):
    """Conversion state of ``fix44``: per symbol, the trade figures and the order book.

    Args:
        depth: the book depth (levels kept by a level-indexed book, levels shown).
    """

    __slots__ = ("depth",)
    whole_books = True

    def __init__(self, depth: int = DEFAULT_BOOK_DEPTH) -> None:
        super().__init__()
        self.depth = depth

    def stage(self, msg: SourceMessage) -> dict[str, SymbolValues]:
        """Every symbol's values after ``msg``, on copies (the state is unchanged).

        A staged book shares its sides with the state's until it changes them
        (:meth:`BookValues.fork`): a message copies the sides it touches, not the book.

        Raises:
            ConversionError: ``book_full``, ``overflow`` or ``symbol_limit``; nothing of the message is used.
        """
        staged: dict[str, SymbolValues] = {}
        new = 0
        for symbol, entries in msg.updates:
            current = self.peek(symbol)
            if current is None and symbol not in staged:
                new += 1
                self._check_room(symbol, new)
            book = current.book.fork() if current is not None and current.book is not None else BookValues()
            values = SymbolValues(*current.astuple(), book=book) if current else SymbolValues(book=book)
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
