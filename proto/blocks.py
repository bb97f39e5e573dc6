"""What a block's ``MarketUpdate`` names: the one reader of the block shapes (docs/wire-format.md).

Every input format writes its blocks in one of two shapes: one symbol's
(``symbol`` and ``state``: ``feedha-fix``'s messages, an image's symbol, a
conflated state) or several symbols' (``symbols``, a ``SymbolUpdate`` each, and
``symbol`` empty: the book formats, one block per source message). A tombstone
names the same way (``symbol``, or ``symbols`` and ``symbol`` empty). The
adapter's recovery, snapshots and purges and the client read blocks only
through these functions, so none of them asks which format wrote one. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from feedha.proto import market_pb2

__all__ = ["block_symbols", "block_wanted", "is_several", "names_wanted", "symbol_states"]


def names_wanted(symbol: str, symbols: Sequence[str], wanted: Callable[[str], bool]) -> bool:
    """Whether a subscriber of the symbols ``wanted`` wants what names ``symbol`` or ``symbols``.

    A block or tombstone names its one ``symbol``, or its several ``symbols`` (``symbol``
    empty): one of them wanted is enough.
    """
    if symbol or not symbols:
        return wanted(symbol)
    return any(wanted(each) for each in symbols)


def block_wanted(update: market_pb2.MarketUpdate, wanted: Callable[[str], bool]) -> bool:
    """:func:`names_wanted` of a block (no list made: the client asks it of every message)."""
    if update.symbol or not update.symbols:
        return wanted(update.symbol)
    return any(wanted(each.symbol) for each in update.symbols)


def is_several(update: market_pb2.MarketUpdate) -> bool:
    """Whether a block is of the several-symbols shape (``symbols``, ``symbol`` empty)."""
    return not update.symbol and len(update.symbols) > 0


def block_symbols(update: market_pb2.MarketUpdate) -> Sequence[str]:
    """Every symbol a block names, in its order."""
    return [each.symbol for each in update.symbols] if is_several(update) else (update.symbol,)


def symbol_states(update: market_pb2.MarketUpdate) -> list[tuple[str, market_pb2.SymbolState]]:
    """Each symbol a block names with its state after the block."""
    if is_several(update):
        return [(each.symbol, each.state) for each in update.symbols]
    return [(update.symbol, update.state)]
