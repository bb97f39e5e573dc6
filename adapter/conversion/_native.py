"""The native conversion engine: runs in the C fast path (:mod:`adapter.conversion._fastpath`).

Theory of operation
-------------------
The C module converts *runs* of ordinary messages (see the theory of
operation at the top of ``adapter/conversion/_fastpath.c``) and stops at
anything else; the core hands that message to the careful path and resumes.
Two things make that safe:

* one conversion state serves both paths: :class:`NativeConversionState` has
  :class:`~adapter.conversion.state.ConversionState`'s interface over the C ``State``;
* the C path only takes tables it reproduces byte for byte: the spec comes
  from :func:`~adapter.conversion._fastpath_spec.compile_spec`, which refuses
  any other.

This module needs the extension: :mod:`adapter.conversion.choice` imports it
only when the extension is built. Pure: no sockets, no clock.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from feedha.adapter.conversion import _fastpath
from feedha.adapter.conversion._fastpath_spec import compile_spec
from feedha.adapter.conversion.engine import ConversionEngine, RunFunction, RunTuple
from feedha.adapter.conversion.state import (
    DIGEST_MASK,
    MAX_SYMBOLS,
    ConversionState,
    SymbolValues,
    next_session,
    session_digest,
    symbol_digest,
)
from feedha.adapter.conversion.table import ConverterTable

logger = logging.getLogger(__name__)


def _values(raw: tuple[Any, ...]) -> SymbolValues:
    return SymbolValues(*raw)


class NativeConversionState(ConversionState):
    """:class:`~adapter.conversion.state.ConversionState` kept in the C module, shared with the fast path.

    Same interface and the same digests (tests compare both).
    """

    __slots__ = ("native",)

    def __init__(self) -> None:
        self.native = _fastpath.State()
        self.native.max_symbols = MAX_SYMBOLS  # the C run stops there; the Python path names it
        self._session = 0

    @property
    def max_symbols(self) -> int:
        """A message naming a new symbol while this many are held is quarantined (``symbol_limit``)."""
        return self.native.max_symbols

    @max_symbols.setter
    def max_symbols(self, value: int) -> None:
        self.native.max_symbols = value

    @property
    def digest(self) -> int:
        return self.native.digest

    @property
    def session(self) -> int:
        return self._session

    @session.setter
    def session(self, session_id: int) -> None:
        self.native.salt = session_digest(session_id)
        self._session = session_id

    def roll(self, session_id: int) -> None:
        session_digest(session_id)  # checks the range before anything changes
        for symbol, raw in self.native.items():
            self.native.set(symbol, next_session(_values(raw)).astuple())
        self.session = session_id

    def recompute_digest(self) -> int:
        total = session_digest(self._session)
        for symbol, raw in self.native.items():
            total += symbol_digest(symbol, _values(raw))
        return total & DIGEST_MASK

    def get(self, symbol: str) -> SymbolValues | None:
        raw = self.native.get(symbol)
        return None if raw is None else _values(raw)

    def symbol_digest(self, symbol: str) -> int | None:
        return self.native.symbol_hash(symbol)

    def set_symbol(self, symbol: str, values: SymbolValues) -> None:
        self.native.set(symbol, values.astuple())

    def snapshot(self) -> dict[str, SymbolValues]:
        return {symbol: _values(raw) for symbol, raw in self.native.items()}

    def restore(self, snapshot: Mapping[str, SymbolValues], *, session: int | None = None) -> None:
        if session is not None:
            self.session = session
        self.native.clear()
        for symbol, values in snapshot.items():
            self.native.set(symbol, values.astuple())

    def __len__(self) -> int:
        return len(self.native)

    def __contains__(self, symbol: object) -> bool:
        return symbol in self.native

    def __repr__(self) -> str:
        return (
            f"<NativeConversionState [symbols={len(self.native)}, session={self._session}, "
            f"digest={self.native.digest:016x}]>"
        )


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
        super().__init__(table, state)
        self._run = _fastpath.FastPath(state.native, compile_spec(table)).run

    def run_function(self) -> RunFunction:
        """The C call itself (``FastPath.run``): no Python frame between the core and C."""
        return self._run

    def run(self, *args: Any) -> RunTuple:
        """:meth:`ConversionEngine.run`: the C call (:meth:`run_function`) with the same arguments."""
        return self._run(*args)
