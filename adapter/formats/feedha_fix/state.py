"""``feedha-fix``'s conversion state: top of book and the day's trade figures per symbol.

Theory of operation
-------------------
:func:`advance` is the conversion rule: trades move a symbol's high, low,
last, volume, notional, trade count and VWAP; bids and asks move ``bid`` and
``ask``. :class:`FeedhaFixState` is :class:`~adapter.conversion.state.ConversionState`
(the values, their digest, the session, the limits) with that rule as its
:meth:`~FeedhaFixState.preview`, each symbol counted at
:data:`~adapter.conversion.budget.FEEDHA_FIX_SYMBOL_BYTES`. The C fast path's state
(:class:`~adapter.formats.feedha_fix._native.NativeConversionState`) is the same
state kept in C. Pure: no sockets, no clock.
"""

from __future__ import annotations

import math
from typing import Final

from feedha.adapter.conversion.budget import FEEDHA_FIX_SYMBOL_BYTES
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.conversion.state import INT64_MAX, ConversionState, SymbolValues
from feedha.adapter.errors import ConversionError
from feedha.proto import market_pb2

__all__ = ["FeedhaFixState", "advance"]

_TRADE: Final = market_pb2.ENTRY_TYPE_TRADE
_BID: Final = market_pb2.ENTRY_TYPE_BID
_ASK: Final = market_pb2.ENTRY_TYPE_ASK


def advance(current: SymbolValues | None, msg: SourceMessage) -> SymbolValues:
    """The conversion rule: a symbol's values after one more message (``current`` is updated in place).

    Trades move high, low, last, volume, notional, trade count and VWAP; bids
    and asks move ``bid``/``ask``. The C fast path (``_fastpath.c``'s ``apply_entry``)
    implements the same rule; tests compare the two.

    Args:
        current: the symbol's values before ``msg`` (a copy the caller owns), ``None`` for a new symbol.
        msg: the converted message.

    Returns:
        The values after ``msg``.

    Raises:
        ConversionError: ``overflow`` when the volume leaves int64 or the notional is no longer finite.
    """
    values = SymbolValues() if current is None else current
    traded = False
    for entry_type, price, size, notional in msg.entries:
        if entry_type == _TRADE:
            if values.trade_count == 0:
                values.high = values.low = price
            elif price > values.high:
                values.high = price
            elif price < values.low:
                values.low = price
            values.last = price
            values.volume += size
            values.notional += notional
            values.trade_count += 1
            traded = True
        elif entry_type == _BID:
            values.bid = price
        elif entry_type == _ASK:
            values.ask = price
    if values.volume > INT64_MAX:
        raise ConversionError(
            "overflow", f"volume of {msg.symbol!r} leaves int64 at source_seq {msg.source_seq}"
        )
    if values.trade_count and not math.isfinite(values.notional):
        raise ConversionError("overflow", f"notional of {msg.symbol!r} is {values.notional}")
    if traded:
        values.vwap = values.notional / values.volume if values.volume else 0.0
    return values


class FeedhaFixState(ConversionState):
    """``feedha-fix``'s :class:`~adapter.conversion.state.ConversionState`: :func:`advance` per message.

    Example:
        >>> state = FeedhaFixState()
        >>> len(state), state.digest
        (0, 0)
    """

    __slots__ = ()
    symbol_bytes = FEEDHA_FIX_SYMBOL_BYTES

    def preview(self, msg: SourceMessage) -> SymbolValues:
        """The values ``msg`` would give its symbol, without changing the state.

        Raises:
            ConversionError: ``overflow`` (see :func:`advance`); ``symbol_limit`` for a new
                symbol while :attr:`max_symbols` are held.
        """
        current = self.get(msg.symbol)
        if current is None:
            self._check_room(msg.symbol)
        return advance(current, msg)
