"""The ``fix44`` conversion state: every symbol's values with its order book (docs/converters.md).

:class:`BookState` keeps every symbol's
:class:`~adapter.conversion.state.SymbolValues` with its
:class:`~adapter.conversion.book.BookValues`, under the same digest, so the
sync rules, snapshots, checkpoints and images carry books unchanged. The
engine that converts into it is :mod:`adapter.formats.fix44.engine`.

Its tables count against the adapter's memory budget (:mod:`adapter.conversion.budget`):
a symbol at :data:`~adapter.conversion.budget.FIX44_SYMBOL_BYTES` and every price level
of its book at :data:`~adapter.conversion.budget.LEVEL_BYTES`; a message whose new symbols
and levels would pass the budget is refused whole (``memory_limit``). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from feedha.adapter.conversion.book import ASK, BID, BookValues, apply_entries
from feedha.adapter.conversion.budget import FIX44_SYMBOL_BYTES, LEVEL_BYTES
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

    __slots__ = ("depth", "_levels")
    whole_books = True
    symbol_bytes = FIX44_SYMBOL_BYTES

    def __init__(self, depth: int = DEFAULT_BOOK_DEPTH) -> None:
        super().__init__()
        self.depth = depth
        self._levels = 0  # every book's levels, both sides

    @property
    def level_count(self) -> int:
        """The price levels every book holds (both sides), as the budget counts them."""
        return self._levels

    def charged(self) -> int:
        """The bytes the tables count: symbols and price levels (adapter.conversion.budget)."""
        return len(self) * self.symbol_bytes + self.level_count * LEVEL_BYTES

    def stage(self, msg: SourceMessage) -> dict[str, SymbolValues]:
        """Every symbol's values after ``msg``, on copies (the state is unchanged).

        A staged book shares its sides with the state's until it changes them
        (:meth:`BookValues.fork`): a message copies the sides it touches, not the book (a
        native state's sides are not even copied: :mod:`.staged_side`).

        Raises:
            ConversionError: ``book_full``, ``overflow``, ``symbol_limit`` or ``memory_limit``;
                nothing of the message is used.
        """
        staged: dict[str, SymbolValues] = {}
        new = grown = 0
        for symbol, entries in msg.updates:
            current = self.view(symbol)
            if current is None and symbol not in staged:
                new += 1
                self._check_room(symbol, new)
            book = current.book.fork() if current is not None and current.book is not None else BookValues()
            values = SymbolValues(*current.astuple(), book=book) if current else SymbolValues(book=book)
            grown -= _levels_of(book)
            apply_entries(book, entries, depth=self.depth, full=msg.full_refresh)
            grown += _levels_of(book)
            staged[symbol] = _summarize(values, book, symbol)
        self._check_memory(f"message {msg.source_seq}", new * self.symbol_bytes + grown * LEVEL_BYTES)
        return staged

    def commit(self, staged: Mapping[str, SymbolValues]) -> None:
        """Adopt what :meth:`stage` returned: its values are fresh copies, kept as they are."""
        for symbol, values in staged.items():
            old_hash = self._hashes.get(symbol, 0)
            new_hash = symbol_digest(symbol, values)
            self._count_levels(self._values.get(symbol), values)
            self._values[symbol] = values
            self._hashes[symbol] = new_hash
            self._digest = (self._digest - old_hash + new_hash) & DIGEST_MASK

    def set_symbol(self, symbol: str, values: SymbolValues) -> None:
        """Adopt one symbol's values (the active's, a session roll), its levels counted."""
        self._count_levels(self._values.get(symbol), values)
        super().set_symbol(symbol, values)

    def restore(self, snapshot: Mapping[str, SymbolValues], *, session: int | None = None) -> None:
        """Replace the whole state by ``snapshot`` (see ConversionState.restore), its levels counted."""
        super().restore(snapshot, session=session)
        self._levels = sum(_levels_of(values.book) for values in self._values.values())

    def _count_levels(self, old: SymbolValues | None, new: SymbolValues) -> None:
        self._levels += _levels_of(new.book) - (_levels_of(old.book) if old is not None else 0)

    def preview(self, msg: SourceMessage) -> SymbolValues:
        """The first symbol's values after ``msg`` (:meth:`stage` has them all)."""
        return self.stage(msg)[msg.symbol]

    def apply(self, msg: SourceMessage) -> SymbolValues:
        """Apply a whole message (every symbol it touches); the first symbol's values."""
        staged = self.stage(msg)
        self.commit(staged)
        return staged[msg.symbol]


def _levels_of(book: BookValues | None) -> int:
    return 0 if book is None else len(book.bids) + len(book.asks)


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
