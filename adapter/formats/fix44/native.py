"""Whether ``fix44``'s state and runs are C: chosen as all native code is (:mod:`adapter._native_code`)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from feedha.adapter._native_code import warn_fallback
from feedha.adapter.conversion import choice

if TYPE_CHECKING:
    from feedha.adapter.formats.fix44._native_books import NativeBookState

logger = logging.getLogger(__name__)

__all__ = ["fix44_native"]


def fix44_native(*, prefer_native: bool = True) -> tuple[type[NativeBookState], Callable[..., Any]] | None:
    """``fix44``'s state in C and its C run, or ``None``: Python's state and runs.

    The state is :class:`~adapter.formats.fix44._native_books.NativeBookState` (the books in
    C structs, ``_orders.BookTable``); ``Fix44Run(state.native, MAX_PRICES)`` is the C run of
    ``fix44`` incremental refreshes over it, whose ``run`` is a
    :data:`~adapter.conversion.engine.RunFunction`. Without the extension the engine keeps
    :class:`~adapter.formats.fix44.book_state.BookState` and runs the Python loop (logged once).

    Args:
        prefer_native: ``False`` gives ``None`` (tests, comparisons).
    """
    if not prefer_native:
        return None
    if choice.ORDERS_NOT_BUILT is not None:
        _warn_fix44_fallback()
        return None
    from feedha.adapter.conversion import _orders
    from feedha.adapter.formats.fix44._native_books import NativeBookState

    run_type: Callable[..., Any] = _orders.Fix44Run
    return NativeBookState, run_type


@functools.cache
def _warn_fix44_fallback() -> None:
    warn_fallback(logger, "the fix44 run", "~10x slower per message", str(choice.ORDERS_NOT_BUILT))
