"""Order books on the client: what ``fix44`` channels deliver, kept per symbol (pure).

A ``fix44`` block (docs/converters.md) carries one ``SymbolUpdate`` per symbol
its source message touched, with the shown book's changes and the symbol's
state after the message, book included; an image carries every symbol's
state. :class:`BookKeeper` keeps the newest book of each symbol from those
states (so a client that joined late, or missed a message that was
retransmitted, never rebuilds from changes) and turns each delivery into
:class:`BookUpdate` values: the symbol, the changes, and the book after them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from feedha.proto import market_pb2
from feedha.proto.model import SESSION_VALUES

__all__ = ["Book", "BookKeeper", "BookUpdate"]

Levels = tuple[tuple[float, float, int], ...]  # (price, size, orders), best first


@dataclass(frozen=True, slots=True)
class Book:
    """One symbol's shown book: at most ``depth`` levels a side, best first, and its session values."""

    symbol: str
    bids: Levels
    asks: Levels
    depth: int
    stats: dict[str, float | None]

    @classmethod
    def of(cls, symbol: str, state: market_pb2.SymbolState) -> Book:
        """The book a ``SymbolState`` carries (its first ``depth`` levels a side)."""
        book = state.book
        depth = book.depth or max(len(book.bids), len(book.asks))
        session = state.session
        stats = {name: getattr(session, name) if session.HasField(name) else None for name in SESSION_VALUES}
        return cls(
            symbol,
            tuple((level.price, level.size, level.orders) for level in book.bids[:depth]),
            tuple((level.price, level.size, level.orders) for level in book.asks[:depth]),
            depth,
            stats,
        )


@dataclass(frozen=True, slots=True)
class BookUpdate:
    """What one message (or an image) did to one symbol's book."""

    msg_seq: int
    symbol: str
    changes: tuple[market_pb2.BookChange, ...]
    trades: tuple[market_pb2.Entry, ...]
    book: Book
    is_image: bool = False


class BookKeeper:
    """The newest book of every symbol seen (see the module docstring)."""

    def __init__(self) -> None:
        self.books: dict[str, Book] = {}

    def book(self, symbol: str) -> Book | None:
        """The newest book of ``symbol`` (``None``: none seen)."""
        return self.books.get(symbol)

    def observe(
        self,
        msg_seq: int,
        update: market_pb2.MarketUpdate,
        *,
        is_image: bool = False,
        wanted: Callable[[str], bool] | None = None,
    ) -> list[BookUpdate]:
        """Take one delivered ``MarketUpdate``; the book updates it makes (none for ``feedha-fix``).

        Args:
            msg_seq: its msg_seq.
            update: the decoded message.
            is_image: it is an image's symbol.
            wanted: which symbols to keep (the client's filter; all when ``None``).
        """
        out: list[BookUpdate] = []
        if update.symbol and update.state.HasField("book"):  # an image's symbol
            if wanted is not None and not wanted(update.symbol):
                return out
            book = self.books[update.symbol] = Book.of(update.symbol, update.state)
            out.append(BookUpdate(msg_seq, update.symbol, (), (), book, is_image))
        for each in update.symbols:
            if wanted is not None and not wanted(each.symbol):
                continue
            book = self.books[each.symbol] = Book.of(each.symbol, each.state)
            out.append(BookUpdate(msg_seq, each.symbol, tuple(each.book_changes), tuple(each.trades), book))
        return out
