"""The ``fix44`` conversion engine: FIX market data into order books (docs/converters.md).

:class:`BookState` (:mod:`adapter.formats.fix44.book_state`) is the conversion state (every symbol's
:class:`~adapter.conversion.state.SymbolValues` with its
:class:`~adapter.conversion.book.BookValues`, under the same digest, so the
sync rules, snapshots, checkpoints and images carry books unchanged).
:class:`Fix44Engine` encodes one block per source message: a ``MarketUpdate``
with one ``SymbolUpdate`` per symbol the message touches.

Where the extension ``_orders`` is built (and the dictionary is the packaged
one), runs are C: ``_orders.Fix44Run`` converts ``35=X`` incremental and ``35=W``
full refreshes whole -- parsed with every tag the dictionary defines for them,
checked, applied to the books they touch, encoded, hashed and committed to the
same state records -- and stops at anything else (a session message, a
security the table does not hold, an unusual number, every error), which the Python
path takes. The reference engine's loop (:meth:`LoopEngine.run` over
:meth:`BookState.stage`/:meth:`BookState.commit` and
:meth:`Fix44Engine.encode_staged`) is the reference for both. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from feedha.adapter.conversion._reference import LoopEngine
from feedha.adapter.conversion.book import MAX_PRICES, BookValues
from feedha.adapter.conversion.engine import RunFunction
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.conversion.state import SymbolValues
from feedha.adapter.formats.fix44.book_state import DEFAULT_BOOK_DEPTH, BookState
from feedha.adapter.formats.fix44.dictionary import Dictionary
from feedha.adapter.formats.fix44.native import fix44_native
from feedha.adapter.formats.fix44.parser import Fix44Converter
from feedha.adapter.formats.fix44.wire import encode_block, price_levels, shown_changes

__all__ = ["DEFAULT_BOOK_DEPTH", "BookState", "Fix44Engine"]


class Fix44Engine(LoopEngine):
    """The ``fix44`` engine (see the module docstring).

    Args:
        dictionary: the checked data dictionary.
        depth: the book depth.
        securities: ``SecurityID`` (or ``SecurityIDSource:SecurityID``) -> symbol.
        prefer_native: the C run where built (``False``: the Python loop, for comparisons).
    """

    def __init__(
        self,
        dictionary: Dictionary | None = None,
        *,
        depth: int = DEFAULT_BOOK_DEPTH,
        securities: Mapping[str, str] | None = None,
        prefer_native: bool = True,
    ) -> None:
        packaged = Dictionary.load()
        fix44 = Fix44Converter(dictionary or packaged, securities)
        # The C run knows the packaged dictionary's rules only: an operator's own takes Python's.
        native = fix44_native(prefer_native=prefer_native and fix44.dictionary == packaged)
        self._native_run: RunFunction | None = None
        if native is None:
            super().__init__(BookState(depth))
        else:  # the state in C structs, and the C run over them
            state_type, run_type = native
            state = state_type(depth)
            super().__init__(state)
            self._native_run = run_type(state.native, MAX_PRICES, securities=fix44.securities).run
        self.fix44 = fix44
        self.depth = depth
        self._last: tuple[bytes, SourceMessage] = (b"", SourceMessage(0, "", 0, ()))
        self.is_native = self._native_run is not None

    def run_function(self) -> RunFunction:
        """The C run (``Fix44Run.run``) where built, else the Python loop.

        :meth:`run` stays the Python loop (the reference): it converts what the C run stops at.
        """
        return self._native_run if self._native_run is not None else self.run

    def parse(self, body: bytes) -> SourceMessage:
        """Convert one ``fix44`` message body (raises ``ConversionError``).

        The last body's result is kept: a run that stopped at a full packet parses its
        message again at the start of the next run (a message is immutable).
        """
        if body == self._last[0]:
            return self._last[1]
        msg = self.fix44.parse(body)
        self._last = (body, msg)
        return msg

    def encode(self, msg: SourceMessage, values: SymbolValues, publish_time_ns: int) -> bytes:
        """One symbol's block (used only when a message touches one symbol)."""
        return self.encode_staged(msg, {msg.symbol: values}, publish_time_ns)

    def encode_staged(
        self, msg: SourceMessage, staged: Mapping[str, SymbolValues], publish_time_ns: int
    ) -> bytes:
        """The block of one message: a ``SymbolUpdate`` per symbol it touches (:mod:`.fix44_wire`)."""
        depth, full = self.depth, msg.full_refresh
        symbols = {}
        for symbol, entries in msg.updates:
            values = staged[symbol]
            trades = [
                (entry.price or 0.0, entry.size or 0.0)
                for entry in entries
                if entry.entry_type == "2" and not full and entry.action != 2
            ]
            before = self.state.view(symbol)
            old = before.book if before is not None else None
            book = values.book or BookValues()
            changes = shown_changes(old, book, depth)
            symbols[symbol] = (trades, changes, values, price_levels(old, book, entries, full))
        return encode_block(msg, symbols, depth, publish_time_ns)
