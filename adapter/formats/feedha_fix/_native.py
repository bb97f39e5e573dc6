"""``feedha-fix``'s native engine: runs in the C fast path (:mod:`adapter.formats.feedha_fix._fastpath`).

Theory of operation
-------------------
The C module converts *runs* of ordinary messages (see the theory of
operation at the top of ``adapter/formats/feedha_fix/_fastpath.c``) and stops at
anything else; the core hands that message to the careful path and resumes.
Two things make that safe:

* one conversion state serves both paths: :class:`NativeConversionState` has
  :class:`~adapter.formats.feedha_fix.state.FeedhaFixState`'s interface over the C ``State``;
* the C path only takes tables it reproduces byte for byte: the spec comes
  from :func:`~adapter.formats.feedha_fix._fastpath_spec.compile_spec`, which refuses
  any other.

This module needs the extension: :mod:`adapter.formats.feedha_fix.choice` imports it
only when the extension is built. Pure: no sockets, no clock.
"""

from __future__ import annotations

import logging
from typing import Any

from feedha.adapter.conversion._native_symbols import NativeSymbols
from feedha.adapter.conversion.budget import DEFAULT_TABLE_BYTES
from feedha.adapter.conversion.engine import ConversionEngine, RunFunction, RunTuple
from feedha.adapter.conversion.messages import SourceMessage
from feedha.adapter.conversion.state import MAX_SYMBOLS, SymbolValues
from feedha.adapter.formats.feedha_fix import _fastpath
from feedha.adapter.formats.feedha_fix._fastpath_spec import compile_spec
from feedha.adapter.formats.feedha_fix.parser import Converter
from feedha.adapter.formats.feedha_fix.state import FeedhaFixState
from feedha.adapter.formats.feedha_fix.table import ConverterTable

logger = logging.getLogger(__name__)


class NativeConversionState(NativeSymbols, FeedhaFixState):
    """:class:`~adapter.formats.feedha_fix.state.FeedhaFixState` kept in the C module, the fast path's.

    Same interface and the same digests (tests compare both); what it does with the C
    ``State`` is :class:`~adapter.conversion._native_symbols.NativeSymbols`.
    """

    __slots__ = ("native", "_symbol_limit")

    def __init__(self) -> None:
        self.native = _fastpath.State()
        self._session = 0
        self._symbol_limit, self._table_budget = MAX_SYMBOLS, DEFAULT_TABLE_BYTES
        self._budget_changed()

    def values_of(self, raw: tuple[Any, ...]) -> SymbolValues:
        return SymbolValues(*raw)

    def set_symbol(self, symbol: str, values: SymbolValues) -> None:
        self.native.set(symbol, values.astuple())


class NativeEngine(ConversionEngine):
    """:class:`~adapter.conversion.engine.ConversionEngine` whose runs are the C fast path.

    Args:
        table: a converter table :func:`compile_spec` accepts.

    Raises:
        Unsupported: the table uses a feature the C path lacks.
    """

    is_native = True

    def __init__(self, table: ConverterTable) -> None:
        state = NativeConversionState()
        super().__init__(state)
        self.table = table
        self.converter = Converter(table)
        self._run = _fastpath.FastPath(state.native, compile_spec(table)).run

    def parse(self, body: bytes) -> SourceMessage:
        """The careful path's parse: the converter table's (raises ``ConversionError``)."""
        return self.converter.parse(body)

    def run_function(self) -> RunFunction:
        """The C call itself (``FastPath.run``): no Python frame between the core and C."""
        return self._run

    def run(self, *args: Any) -> RunTuple:
        """:meth:`ConversionEngine.run`: the C call (:meth:`run_function`) with the same arguments."""
        return self._run(*args)
