"""Which order table a market-by-order state keeps, and whether ``_orders`` is built: one place.

The choice is made as every package of the adapter makes it
(:mod:`adapter._native_code`). The ``itch50`` state's order table, price
levels, symbol digest and block encoder come from the C extension ``_orders``
where it is built, else from :mod:`adapter.conversion.order_table` and
:func:`~adapter.conversion.codec.encode_book_block`; the ``fix44`` engine's C run
(``_orders.Fix44Run``, over its state in C) comes from the same extension
(:func:`adapter.formats.fix44.native.fix44_native`, which reads :data:`ORDERS_NOT_BUILT`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from feedha.adapter._native_code import warn_fallback, why_not_built
from feedha.adapter.conversion import order_table
from feedha.adapter.conversion.codec import BlockSymbol, encode_book_block
from feedha.adapter.conversion.state import SymbolValues, symbol_digest

logger = logging.getLogger(__name__)

__all__ = [
    "IS_NATIVE_ORDERS_BUILT",
    "ORDERS_NOT_BUILT",
    "OrderStore",
    "make_order_store",
]

ORDERS_NOT_BUILT: Final = why_not_built("feedha.adapter.conversion._orders")
IS_NATIVE_ORDERS_BUILT: Final = ORDERS_NOT_BUILT is None


@dataclass(frozen=True, slots=True)
class OrderStore:
    """Where a market-by-order state keeps its live orders: one implementation's three parts.

    Attributes:
        table: makes an empty order table (``OrderTable()``).
        levels: makes one side's price levels (``SideLevels(is_bid=...)``).
        order_hash: the digest's mix of one live order.
        encode_block: a book block's payload (:func:`~adapter.conversion.codec.encode_book_block`).
        symbol_digest: a symbol's share of the digest (:func:`~adapter.conversion.state.symbol_digest`).
        is_native: the C extension's parts.
        run: makes the C run of ``A F E C X D U P Q R`` over a state (``MboRun(state, SymbolValues,
            BookValues)``; its ``run`` is a :data:`~adapter.conversion.engine.RunFunction`), or
            ``None``: the runs are Python's.
        symbol_map: makes the mapping the state keeps its symbols' values in with the C run
            (``MboRun.symbol_map(SymbolValues, BookValues)``: C records), or ``None``: a dict.
    """

    table: Callable[[], order_table.LiveOrders]
    levels: Callable[..., order_table.PriceLevels]
    order_hash: Callable[[int, int, int, int, int], int]
    encode_block: Callable[[int, int, int, Iterable[BlockSymbol]], bytes]
    symbol_digest: Callable[[str, SymbolValues], int]
    is_native: bool
    run: Callable[..., Any] | None = None
    symbol_map: Callable[..., Any] | None = None


def make_order_store(*, prefer_native: bool = True) -> OrderStore:
    """The itch50 state's C parts when built, else their Python references (logged once).

    Args:
        prefer_native: ``False`` gives the reference (tests, comparisons).
    """
    if prefer_native and ORDERS_NOT_BUILT is None:
        from feedha.adapter.conversion import _orders

        return OrderStore(
            _orders.OrderTable,
            _orders.SideLevels,
            _orders.order_hash,
            _orders.encode_block,
            _orders.symbol_digest,
            is_native=True,
            run=_orders.MboRun,
            symbol_map=_orders.MboRun.symbol_map,
        )
    if prefer_native:
        _warn_orders_fallback()
    return OrderStore(
        order_table.OrderTable,
        order_table.SideLevels,
        order_table.order_hash,
        encode_book_block,
        symbol_digest,
        is_native=False,
    )


@functools.cache
def _warn_orders_fallback() -> None:
    # Once a process: every itch50 state asks, and the reason does not change.
    warn_fallback(logger, "the itch50 order table", "~3.8x the memory per live order", str(ORDERS_NOT_BUILT))
