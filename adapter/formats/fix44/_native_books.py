"""The native ``fix44`` conversion state: books kept in C (:class:`_orders.BookTable`).

Theory of operation
-------------------
:class:`NativeBookState` is :class:`~adapter.formats.fix44.book_state.BookState`
with the symbols kept in C structs rather than Python objects, as
:class:`~adapter.formats.feedha_fix._native.NativeConversionState` keeps feedha-fix's:
per symbol a record of its nine values, its book's kind and session values
and both sides of ``(price, size, orders)`` (sorted arrays, balanced trees past 64
levels: ``_level_tree.h``), with each side's share
of the digest (``book.side_hash``) kept as the sides change. The C run
(``_orders.Fix44Run``) converts messages on the records themselves, so a
message it takes builds no Python object; the Python path (``35=W``, session
messages, every error) asks for a symbol's values and gets new
:class:`~adapter.conversion.state.SymbolValues` and
:class:`~adapter.conversion.book.BookValues` whose sides are views of the record
(:meth:`NativeBookState.view`: ``_orders.SideView``, read in place, never copied),
stages on them as :class:`BookState` does (a side it changes is a
:class:`~adapter.conversion.staged_side.StagedSide` over the view), and commits
(:meth:`NativeBookState.commit`: the staged changes played on the record,
``BookTable.patch``). So the careful path costs what a message touches -- O(log n)
a level -- not the depth of its book: a venue whose every message takes it, or a
flood of New on a full side (``book_full``), costs no more on a book of 5,000
prices a side than on one of ten. :meth:`NativeBookState.peek`, :meth:`get` and
:meth:`snapshot` still build whole lists (their values outlive the next change).

Same interface, same digests and the same snapshots as :class:`BookState`
(``tests/unit/adapter/test_fix44_run.py`` plays both on the same streams). A
value of another type (an int where a book keeps a float) becomes the double
the digest and the wire already made of it. Orders keep their low 64 bits (all
the digest and the wire use of them), so a count the parser accepts (19
digits at most) comes back as it went in.

This module needs the extension: :mod:`adapter.conversion.choice` imports it
only when ``_orders`` is built. Pure: no sockets, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from feedha.adapter.conversion import _orders
from feedha.adapter.conversion._native_symbols import NativeSymbols
from feedha.adapter.conversion.book import BookValues
from feedha.adapter.conversion.budget import DEFAULT_TABLE_BYTES, LEVEL_BYTES
from feedha.adapter.conversion.staged_side import StagedSide
from feedha.adapter.conversion.state import MAX_SYMBOLS, SymbolValues
from feedha.adapter.formats.fix44.book_state import DEFAULT_BOOK_DEPTH, BookState

__all__ = ["NativeBookState"]


def _book_fields(book: BookValues | None, bids: Any = None, asks: Any = None) -> tuple[Any, ...] | None:
    # BookValues' 15 fields, with the sides given (by default the book's own, as lists).
    if book is None:
        return None
    return (
        book.level_indexed,
        _as_list(book.bids) if bids is None else bids,
        _as_list(book.asks) if asks is None else asks,
        book.volume,
        book.last,
        book.high,
        book.low,
        book.open,
        book.close,
        book.settle,
        book.open_interest,
        book.vwap,
        book.notional,
        book.traded,
        book.trades,
    )


def _as_list(levels: Any) -> list[Any]:
    return levels if isinstance(levels, list) else list(levels)  # a tuple, a SideView, a StagedSide


def _side_patch(levels: Any) -> Any:
    # A staged side as BookTable.patch takes it: (the view it read, its ops), or its levels whole.
    if isinstance(levels, _orders.SideView):
        return (levels, ())
    if isinstance(levels, StagedSide) and isinstance(levels.base, _orders.SideView):
        return (levels.base, levels.ops)
    return _as_list(levels)


class NativeBookState(NativeSymbols, BookState):
    """:class:`~adapter.formats.fix44.book_state.BookState` kept in C (see the module docstring).

    What it does with the ``BookTable`` beyond staging is
    :class:`~adapter.conversion._native_symbols.NativeSymbols`.

    Args:
        depth: the book depth.
    """

    __slots__ = ("native", "_symbol_limit")

    def __init__(self, depth: int = DEFAULT_BOOK_DEPTH) -> None:
        self.native = _orders.BookTable()
        self.native.depth = depth
        self._session = 0
        self._symbol_limit, self._table_budget = MAX_SYMBOLS, DEFAULT_TABLE_BYTES
        self._budget_changed()

    def _budget_changed(self) -> None:
        # The C run stops at a new symbol past the limit and at a message its budget refuses;
        # the Python path (BookState.stage) then names it (symbol_limit, memory_limit).
        native = self.native
        native.max_symbols = self._symbol_limit
        native.budget, native.symbol_bytes, native.level_bytes = (
            self._table_budget,
            self.symbol_bytes,
            LEVEL_BYTES,
        )

    @property
    def level_count(self) -> int:
        """The price levels every book holds (both sides), as the C table counts them."""
        levels: int = self.native.levels
        return levels

    @property
    def depth(self) -> int:
        """The book depth (levels kept by a level-indexed book, levels shown)."""
        depth: int = self.native.depth
        return depth

    @depth.setter
    def depth(self, value: int) -> None:
        self.native.depth = value

    def values_of(self, raw: tuple[Any, ...]) -> SymbolValues:
        # A record as BookTable.get gives it: SymbolValues' nine, then the book's fields or None.
        volume, high, low, last, vwap, trade_count, bid, ask, notional, book = raw
        values = SymbolValues(volume, high, low, last, vwap, trade_count, bid, ask, notional)
        values.book = None if book is None else BookValues(*book)
        return values

    def set_symbol(self, symbol: str, values: SymbolValues) -> None:
        self.native.set(symbol, values.astuple(), _book_fields(values.book))

    def commit(self, staged: Mapping[str, SymbolValues]) -> None:
        """Adopt what :meth:`stage` returned.

        A book staged over its record's views (:meth:`view`, :mod:`.staged_side`) has its
        changes played on the record (``BookTable.patch``: O(log n) a change); any other
        symbol's record is replaced whole. Everything is read before the first record changes
        (a view reads only until then); the staged books then read the records as committed.
        """
        writes: list[tuple[str, SymbolValues, Any, Any]] = []
        for symbol, values in staged.items():
            book = values.book
            sides = (None, None) if book is None else (_side_patch(book.bids), _side_patch(book.asks))
            writes.append((symbol, values, *sides))
        for symbol, values, bids, asks in writes:
            if isinstance(bids, tuple) or isinstance(asks, tuple):  # staged over the record's views
                self.native.patch(symbol, values.astuple(), _book_fields(values.book, (), ()), bids, asks)
            else:
                self.native.set(symbol, values.astuple(), _book_fields(values.book, bids, asks))
        for symbol, values, bids, asks in writes:  # the staged books: views of the records as they are now
            if values.book is not None and (isinstance(bids, tuple) or isinstance(asks, tuple)):
                raw = self.native.view(symbol)
                values.book.bids, values.book.asks = raw[-1][1], raw[-1][2]

    def peek(self, symbol: str) -> SymbolValues | None:
        """One symbol's values, built from its record (a new object at every call)."""
        return self.get(symbol)

    def view(self, symbol: str) -> SymbolValues | None:
        """One symbol's values with its book's sides read in place (``_orders.SideView``).

        O(1) whatever the book's depth; the sides read only until the state next changes
        (then RuntimeError): what :meth:`stage` and ``Fix44Engine.encode_staged`` read.
        """
        raw = self.native.view(symbol)
        return None if raw is None else self.values_of(raw)
