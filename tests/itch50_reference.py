"""An independent ITCH 5.0 reference: books and session values from the messages, without feedha.

Its own reading of the specification's layouts (``struct`` at the documented
offsets), plain dicts of live orders, ``Fraction`` for VWAP (then the nearest
double), so a test compares feedha's engine with a second implementation of
the rules of docs/converters.md ("itch50").
"""

from __future__ import annotations

import struct
from fractions import Fraction
from typing import Any

STATS = ("volume", "last", "high", "low", "open", "close", "vwap")


class ItchReference:
    """Feed BinaryFILE bytes or single messages; read the books and stats as the drill prints them."""

    def __init__(self, depth: int = 10) -> None:
        self.depth = depth
        self.orders: dict[int, tuple[str, str, int, int]] = {}  # ref -> stock, side B/S, price, shares
        self.symbols: dict[str, dict[str, Any]] = {}

    def feed_file(self, data: bytes) -> None:
        pos = 0
        while pos + 2 <= len(data):
            (length,) = struct.unpack_from(">H", data, pos)
            self.feed(data[pos + 2 : pos + 2 + length])
            pos += 2 + length

    def _symbol(self, stock: bytes) -> dict[str, Any]:
        name = stock.decode().rstrip(" ")
        return self.symbols.setdefault(name, {"volume": 0, "last": None, "high": None, "low": None,
                                              "notional": Fraction(0), "seen": False})  # fmt: skip

    def _trade(self, stock: str, price: int, shares: int) -> None:
        stats = self.symbols[stock]
        value = Fraction(price, 10_000)
        stats["seen"] = True
        stats["volume"] += shares
        stats["last"] = value
        stats["high"] = value if stats["high"] is None else max(stats["high"], value)
        stats["low"] = value if stats["low"] is None else min(stats["low"], value)
        stats["notional"] += value * shares

    def feed(self, msg: bytes) -> None:  # noqa: C901 - one branch a message type, as the spec lists them
        kind = msg[:1]
        if kind == b"R" and len(msg) == 39:
            self._symbol(msg[11:19])
        elif kind in (b"A", b"F") and len(msg) == (36 if kind == b"A" else 40):
            ref, side, shares, stock, price = struct.unpack_from(">QcI8sI", msg, 11)
            self._symbol(stock)
            self.orders[ref] = (stock.decode().rstrip(" "), side.decode(), price, shares)
        elif kind in (b"E", b"C", b"X"):
            ref, shares = struct.unpack_from(">QI", msg, 11)
            stock, side, price, left = self.orders[ref]
            left -= shares
            if left:
                self.orders[ref] = (stock, side, price, left)
            else:
                del self.orders[ref]
            if kind == b"E":
                self._trade(stock, price, shares)
            elif kind == b"C" and msg[31:32] == b"Y":
                self._trade(stock, struct.unpack_from(">I", msg, 32)[0], shares)
        elif kind == b"D":
            del self.orders[struct.unpack_from(">Q", msg, 11)[0]]
        elif kind == b"U":
            ref, new_ref, shares, price = struct.unpack_from(">QQII", msg, 11)
            stock, side, _price, _shares = self.orders.pop(ref)
            self.orders[new_ref] = (stock, side, price, shares)
        elif kind == b"P":
            _ref, _side, shares, stock, price, _match = struct.unpack_from(">QcI8sIQ", msg, 11)
            self._symbol(stock)
            self._trade(stock.decode().rstrip(" "), price, shares)
        elif kind == b"Q":
            shares, stock, price = struct.unpack_from(">Q8sI", msg, 11)
            self._symbol(stock)
            self._trade(stock.decode().rstrip(" "), price, shares)

    def shown(self) -> dict[str, dict[str, list[list[float]]]]:
        """Every symbol's book: ``[price, size]`` best first, up to the depth."""
        levels: dict[str, dict[str, dict[int, int]]] = {name: {"B": {}, "S": {}} for name in self.symbols}
        for stock, side, price, shares in self.orders.values():
            book = levels[stock][side]
            book[price] = book.get(price, 0) + shares
        out = {}
        for name, sides in levels.items():
            bids = sorted(sides["B"].items(), reverse=True)[: self.depth]
            asks = sorted(sides["S"].items())[: self.depth]
            out[name] = {
                "bids": [[price / 10_000, float(size)] for price, size in bids],
                "asks": [[price / 10_000, float(size)] for price, size in asks],
            }
        return out

    def shown_stats(self) -> dict[str, dict[str, float | None]]:
        """Every symbol's session values (``None``: never set)."""
        out = {}
        for name, stats in self.symbols.items():
            seen = stats["seen"]
            volume = stats["volume"]
            out[name] = {
                "volume": float(volume) if seen else None,
                "last": None if stats["last"] is None else float(stats["last"]),
                "high": None if stats["high"] is None else float(stats["high"]),
                "low": None if stats["low"] is None else float(stats["low"]),
                "open": None,
                "close": None,
                "vwap": float(stats["notional"] / volume) if volume else None,
            }
        return out
