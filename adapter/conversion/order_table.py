"""The live orders of a market-by-order feed, and the price levels they add up to.

Theory of operation
-------------------
Live orders are counted in the millions, so :class:`OrderTable` keeps them
compact: one dict from the order reference to a slot, and per slot a symbol
index (``array('I')``), a side (``bytearray``), a price in 1/10,000
(``array('I')``) and the remaining shares (``array('I')``). A removed
order's slot is reused. No object is made per order beyond the dict's key
and slot integers (docs/performance.md has the measured bytes per order).

:class:`SideLevels` is one side of one symbol's book by price: the total
shares and the number of orders at each price and the prices sorted best
first, kept as orders come and go in a ``sortedcontainers.SortedList``
(O(log n) to add or remove a price wherever it goes: a run of new best
prices never moves the whole side, as an insort into a list did).

The order table is covered by a 64-bit digest kept incrementally: the sum
mod 2**64 of a mix of every live order's reference, symbol, side, price and
shares (:func:`order_hash`), the same in every process.

The dicts here are keyed by numbers a venue chooses (references, prices),
and CPython does not randomize the hash of an int (it is the value mod
2**61 - 1). They stay plain dicts: CPython's dict folds every bit of the
hash into its probe sequence, so keys chosen to share a slot part after a
few probes, and only keys with equal hashes collide all the way -- at most
nine u64 references share one, one u32 price. Keys that share their low 20
to 40 bits cost no more per add than random ones (docs/robustness.md,
"Tables keyed by input"). The C twin's table keys by SipHash under a
per-process random key instead (``_orders.c``, ``_siphash.h``). Pure.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterator
from typing import Final, Protocol

from sortedcontainers import SortedList

__all__ = ["ORDER_RECORD", "LiveOrders", "OrderTable", "PriceLevels", "SideLevels", "order_hash"]

MASK: Final = (1 << 64) - 1
ORDER_RECORD: Final = struct.Struct(">QBII")  # ref, side, price, shares: one order in a snapshot
_K1: Final = 0x9E3779B97F4A7C15
_K2: Final = 0xBF58476D1CE4E5B9
_K3: Final = 0x94D049BB133111EB


def order_hash(ref: int, symbol_hash: int, side: int, price: int, shares: int) -> int:
    """A u64 mix of one live order (splitmix64's finalizer over its fields)."""
    x = (ref * _K1 + symbol_hash + (side << 62) + price * _K2 + shares * _K3) & MASK
    x = ((x ^ (x >> 30)) * _K2) & MASK
    x = ((x ^ (x >> 27)) * _K3) & MASK
    return x ^ (x >> 31)


class LiveOrders(Protocol):
    """What an order table offers: :class:`OrderTable`, or the C extension ``_orders``'s twin."""

    def __len__(self) -> int: ...
    def __contains__(self, ref: object) -> bool: ...
    def get(self, ref: int) -> tuple[int, int, int, int] | None: ...
    def add(self, ref: int, symbol: int, side: int, price: int, shares: int) -> None: ...
    def set_shares(self, ref: int, shares: int) -> None: ...
    def remove(self, ref: int) -> None: ...
    def clear(self) -> None: ...
    def items(self) -> Iterator[tuple[int, int, int, int, int]]: ...


class PriceLevels(Protocol):
    """What one side's price levels offer: :class:`SideLevels`, or its C twin."""

    def move(self, price: int, shares: int, orders: int) -> None: ...
    def best(
        self, depth: int, moves: dict[int, tuple[int, int]] | None = None
    ) -> list[tuple[int, int, int]]: ...


class OrderTable:
    """Live orders by reference (see the module docstring)."""

    __slots__ = ("_slots", "_symbol", "_side", "_price", "_shares", "_free")

    def __init__(self) -> None:
        self._slots: dict[int, int] = {}
        self._symbol = array("I")
        self._side = bytearray()
        self._price = array("I")
        self._shares = array("I")
        self._free: list[int] = []

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, ref: object) -> bool:
        return ref in self._slots

    def get(self, ref: int) -> tuple[int, int, int, int] | None:
        """``(symbol index, side, price, shares)`` of a live order, or ``None``."""
        slot = self._slots.get(ref)
        if slot is None:
            return None
        return self._symbol[slot], self._side[slot], self._price[slot], self._shares[slot]

    def add(self, ref: int, symbol: int, side: int, price: int, shares: int) -> None:
        """Add a live order (the caller checked that ``ref`` is not live)."""
        free = self._free
        if free:
            slot = free.pop()
            self._symbol[slot], self._side[slot] = symbol, side
            self._price[slot], self._shares[slot] = price, shares
        else:
            slot = len(self._side)
            self._symbol.append(symbol)
            self._side.append(side)
            self._price.append(price)
            self._shares.append(shares)
        self._slots[ref] = slot

    def set_shares(self, ref: int, shares: int) -> None:
        """Set a live order's remaining shares."""
        self._shares[self._slots[ref]] = shares

    def remove(self, ref: int) -> None:
        """Remove a live order."""
        self._free.append(self._slots.pop(ref))

    def clear(self) -> None:
        """Remove every order (and give the memory back)."""
        self.__init__()  # type: ignore[misc]

    def items(self) -> Iterator[tuple[int, int, int, int, int]]:
        """Every live order: ``(ref, symbol index, side, price, shares)``, in no set order."""
        symbol, side, price, shares = self._symbol, self._side, self._price, self._shares
        for ref, slot in self._slots.items():
            yield ref, symbol[slot], side[slot], price[slot], shares[slot]


class SideLevels:
    """One side of one symbol's book by price (see the module docstring).

    Args:
        is_bid: bids are best at the highest price, asks at the lowest.
    """

    __slots__ = ("sign", "size", "count", "keys")

    def __init__(self, *, is_bid: bool) -> None:
        self.sign = -1 if is_bid else 1
        self.size: dict[int, int] = {}
        self.count: dict[int, int] = {}
        self.keys = SortedList()  # sign * price, ascending: best first

    def move(self, price: int, shares: int, orders: int) -> None:
        """Add ``shares`` and ``orders`` (negative: take off) at ``price``; a level at 0 orders goes."""
        count = self.count.get(price, 0) + orders
        if count <= 0:
            self.size.pop(price, None)
            if self.count.pop(price, None) is not None:
                self.keys.remove(self.sign * price)
            return
        if price not in self.count:
            self.keys.add(self.sign * price)
        self.count[price] = count
        self.size[price] = self.size.get(price, 0) + shares

    def best(self, depth: int, moves: dict[int, tuple[int, int]] | None = None) -> list[tuple[int, int, int]]:
        """The best ``depth`` levels ``(price, shares, orders)``, after ``moves`` if given (unchanged).

        Args:
            depth: how many levels.
            moves: price -> (shares, orders) to add first, as :meth:`move` would (not applied).
        """
        sign, size, count = self.sign, self.size, self.count
        if not moves:
            return [(sign * key, size[sign * key], count[sign * key]) for key in self.keys[:depth]]
        prices = {sign * key for key in self.keys[: depth + len(moves)]} | set(moves)
        levels = []
        for price in prices:
            d_shares, d_orders = moves.get(price, (0, 0))
            orders = count.get(price, 0) + d_orders
            if orders > 0:
                levels.append((price, size.get(price, 0) + d_shares, orders))
        levels.sort(key=lambda level: sign * level[0])
        return levels[:depth]
