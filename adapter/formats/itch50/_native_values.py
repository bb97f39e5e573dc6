"""The itch50 state's symbols in C records: what :class:`~adapter.formats.itch50.state.MboState` keeps.

Where the C run is built, ``MboState._values`` is an ``_orders.SymbolMap`` (a
mapping of str to :class:`~adapter.conversion.state.SymbolValues` whose values
live in C records, adapter/formats/itch50/_symbol_map.c) and ``_hashes`` a view
of the records' hashes (:class:`Hashes`): the parts of a dict the state uses.
Pure: no sockets, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from feedha.adapter.conversion.state import SymbolValues

__all__ = ["Hashes", "native_symbols"]


class Hashes:
    """``MboState._hashes`` over a SymbolMap: each symbol's share of the digest, kept in its record."""

    __slots__ = ("_symbols",)

    def __init__(self, symbols: Any) -> None:
        self._symbols = symbols

    def get(self, symbol: str, default: int | None = None) -> int | None:
        """The symbol's hash, or ``default`` when it has no record."""
        found: int | None = self._symbols.hash_of(symbol)
        return default if found is None else found

    def __setitem__(self, symbol: str, value: int) -> None:
        self._symbols.set_hash(symbol, value)

    def values(self) -> list[int]:
        """Every symbol's hash, in the order the symbols came."""
        return [self._symbols.hash_of(name) for name in self._symbols.keys()]


def native_symbols(
    symbols: Any, values: Mapping[str, SymbolValues], hashes: Mapping[str, int]
) -> tuple[dict[str, SymbolValues], dict[str, int]]:
    """``symbols`` (an empty SymbolMap) filled with ``values`` and ``hashes``, as the state keeps them.

    Typed as the dicts they stand in for: the state uses ``get``, ``[]``, ``items`` and the like.
    """
    for name, found in values.items():
        symbols[name] = found
        symbols.set_hash(name, hashes.get(name, 0))
    return cast("dict[str, SymbolValues]", symbols), cast("dict[str, int]", Hashes(symbols))
