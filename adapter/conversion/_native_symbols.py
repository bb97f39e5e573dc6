"""The part of a conversion state kept in a C table of symbols: shared by both native states.

Theory of operation
-------------------
feedha-fix's :class:`~adapter.formats.feedha_fix._native.NativeConversionState` (over
``_fastpath.State``) and fix44's
:class:`~adapter.formats.fix44._native_books.NativeBookState` (over
``_orders.BookTable``) keep their symbols in C, in tables with the same
interface: ``digest``, ``salt``, ``max_symbols``, ``get``, ``set``,
``items``, ``symbol_hash``, ``clear``, ``len`` and ``in``. :class:`NativeSymbols`
is what a state does with such a table -- the digest and the session's salt,
the symbol limit, snapshots, restores, the session roll -- whatever a symbol's
record holds; each state says how a record becomes
:class:`~adapter.conversion.state.SymbolValues` (:meth:`NativeSymbols.values_of`)
and how values go in (``set_symbol``). It comes first among a state's bases, so
its properties stand in for :class:`~adapter.conversion.state.ConversionState`'s
attributes. Pure: no sockets, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from feedha.adapter.conversion.state import (
    DIGEST_MASK,
    SymbolValues,
    next_session,
    session_digest,
    symbol_digest,
)

__all__ = ["NativeSymbols"]


class NativeSymbols:
    """A conversion state's symbols in a C table ``native`` (a mixin; see the module docstring)."""

    __slots__ = ()
    native: Any
    _session: int
    _symbol_limit: int
    _table_budget: int
    symbol_bytes: int

    def values_of(self, raw: tuple[Any, ...]) -> SymbolValues:
        """One record as the table gives it, as :class:`~adapter.conversion.state.SymbolValues`."""
        raise NotImplementedError

    def set_symbol(self, symbol: str, values: SymbolValues) -> None:
        """Adopt one symbol's values into the table (its record replaced whole)."""
        raise NotImplementedError

    @property
    def max_symbols(self) -> int:
        """A message naming a new symbol while this many are held is quarantined (``symbol_limit``)."""
        return self._symbol_limit

    @max_symbols.setter
    def max_symbols(self, value: int) -> None:
        self._symbol_limit = value  # type: ignore[misc]  # a slot of the state it is mixed into
        self._budget_changed()

    def _budget_changed(self) -> None:
        # The C run stops at a message naming a new symbol past what the limit and the budget
        # allow; the Python path then names which (symbol_limit or memory_limit).
        self.native.max_symbols = min(self._symbol_limit, self._table_budget // self.symbol_bytes)

    @property
    def digest(self) -> int:
        """The table's digest: its symbols' hashes and the session's, mod 2**64."""
        digest: int = self.native.digest
        return digest

    @property
    def session(self) -> int:
        """The session the state belongs to (0: none yet); the digest covers it."""
        return self._session

    @session.setter
    def session(self, session_id: int) -> None:
        self.native.salt = session_digest(session_id)
        self._session = session_id  # type: ignore[misc]  # a slot of the state it is mixed into

    def roll(self, session_id: int) -> None:
        """Start session ``session_id``: every symbol's daily fields start again (O(symbols))."""
        session_digest(session_id)  # checks the range before anything changes
        for symbol, raw in self.native.items():
            self.set_symbol(symbol, next_session(self.values_of(raw)))
        self.session = session_id

    def recompute_digest(self) -> int:
        """The digest recomputed in Python from every record (a check of the table's)."""
        total = session_digest(self._session)
        for symbol, raw in self.native.items():
            total += symbol_digest(symbol, self.values_of(raw))
        return total & DIGEST_MASK

    def get(self, symbol: str) -> SymbolValues | None:
        """One symbol's values, built from its record (``None``: never seen)."""
        raw = self.native.get(symbol)
        return None if raw is None else self.values_of(raw)

    def symbol_digest(self, symbol: str) -> int | None:
        """One symbol's share of the digest, or ``None`` if unknown."""
        digest: int | None = self.native.symbol_hash(symbol)
        return digest

    def snapshot(self) -> dict[str, SymbolValues]:
        """Every symbol's values, built from the records."""
        return {symbol: self.values_of(raw) for symbol, raw in self.native.items()}

    def restore(self, snapshot: Mapping[str, SymbolValues], *, session: int | None = None) -> None:
        """Replace every record by ``snapshot``'s values (``session``: ``None`` keeps the current one)."""
        if session is not None:
            self.session = session
        self.native.clear()
        for symbol, values in snapshot.items():
            self.set_symbol(symbol, values)

    def __len__(self) -> int:
        return len(self.native)

    def __contains__(self, symbol: object) -> bool:
        return symbol in self.native

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} [symbols={len(self.native)}, session={self._session}, "
            f"digest={self.native.digest:016x}]>"
        )
