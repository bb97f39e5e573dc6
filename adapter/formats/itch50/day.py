"""Seeded TotalView-ITCH 5.0 captures (``itch50``'s writer) in the BinaryFILE layout, for tests and drills.

:func:`make_itch_capture` writes a trading day as NASDAQ's sample files hold
it: a u16 big-endian length before every message. Messages are laid out
field by field at the specification's offsets (``struct``): a start of
messages ``S``, a stock directory ``R`` for every symbol, trading actions
``H``, then adds (``A`` and ``F``), executions (``E``, ``C`` printable and
not), partial cancels ``X``, deletes ``D``, replaces ``U``, trades ``P``,
crosses ``Q``, broken trades ``B`` and a few types that move no book (``I``,
``N``, ``L``), with timestamps from 03:00 to 20:05, and an end of messages.
Every order message names a live order, so nothing is quarantined. Pure.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from typing import Final

__all__ = ["ItchCapture", "make_itch_capture"]

DAY_START_NS: Final = 3 * 3600 * 10**9
DAY_END_NS: Final = (20 * 3600 + 5 * 60) * 10**9
_LEN: Final = struct.Struct(">H")


@dataclass(frozen=True, slots=True)
class ItchCapture:
    """A generated capture: the BinaryFILE bytes and what it holds."""

    data: bytes
    messages: int
    symbols: tuple[str, ...]
    live_orders: int  # orders still live at the end


def _head(kind: bytes, length: int, locate: int, ns: int) -> bytearray:
    buf = bytearray(length)
    buf[0:1] = kind
    struct.pack_into(">HH", buf, 1, locate, 0)
    buf[5:11] = ns.to_bytes(6, "big")
    return buf


class _Day:
    """The generator's running state: live orders, the clock, the messages written."""

    def __init__(self, rng: random.Random, symbols: list[str], total: int, *, book_only: bool) -> None:
        self.book_only = book_only
        self.rng = rng
        self.symbols = symbols
        self.live: dict[int, list[int]] = {}  # ref -> [symbol index, side (0 buy 1 sell), price, shares]
        self.refs: list[int] = []  # live refs (swap-removed) for a uniform pick
        self.where: dict[int, int] = {}
        self.next_ref = 1_000_000_007
        self.mid = [rng.randint(1_000, 5_000) * 100 for _ in symbols]  # prices in 1/10,000
        self.out: list[bytes] = []
        self.total = max(total, 1)
        self.match = 1

    def ns(self) -> int:
        return DAY_START_NS + (DAY_END_NS - DAY_START_NS) * len(self.out) // self.total

    def emit(self, buf: bytearray) -> None:
        self.out.append(_LEN.pack(len(buf)) + bytes(buf))

    def stock(self, index: int) -> bytes:
        return self.symbols[index].encode().ljust(8)

    def system(self, code: bytes) -> None:
        if self.book_only:
            return
        buf = _head(b"S", 12, 0, self.ns())
        buf[11:12] = code
        self.emit(buf)

    def directory(self, index: int) -> None:
        buf = _head(b"R", 39, index + 1, self.ns())
        buf[11:19] = self.stock(index)
        buf[19:21] = b"QN"
        struct.pack_into(">I", buf, 21, 100)
        buf[25:39] = b"NCZ N N1NN\x00\x00\x00\x00"
        self.emit(buf)

    def action(self, index: int) -> None:
        if self.book_only:
            return
        buf = _head(b"H", 25, index + 1, self.ns())
        buf[11:19] = self.stock(index)
        buf[19:25] = b"T     "
        self.emit(buf)

    def _track(self, ref: int, order: list[int]) -> None:
        self.live[ref] = order
        self.where[ref] = len(self.refs)
        self.refs.append(ref)

    def _untrack(self, ref: int) -> None:
        del self.live[ref]
        at = self.where.pop(ref)
        last = self.refs.pop()
        if last != ref:
            self.refs[at] = last
            self.where[last] = at

    def price(self, index: int, side: int) -> int:
        offset = self.rng.randint(1, 40) * 100  # a cent apart, around the mid
        return self.mid[index] - offset if side == 0 else self.mid[index] + offset

    def add(self) -> None:
        rng = self.rng
        index, side = rng.randrange(len(self.symbols)), rng.randrange(2)
        ref, self.next_ref = self.next_ref, self.next_ref + rng.randint(1, 3)
        order = [index, side, self.price(index, side), rng.randint(1, 20) * 100]
        mpid = rng.random() < 0.1
        buf = _head(b"F" if mpid else b"A", 40 if mpid else 36, index + 1, self.ns())
        struct.pack_into(">Q", buf, 11, ref)
        buf[19:20] = b"BS"[side : side + 1]
        struct.pack_into(">I", buf, 20, order[3])
        buf[24:32] = self.stock(index)
        struct.pack_into(">I", buf, 32, order[2])
        if mpid:
            buf[36:40] = b"NSDQ"
        self.emit(buf)
        self._track(ref, order)

    def touch(self) -> None:
        """One message on a live order: E, C, X, D or U."""
        rng = self.rng
        ref = self.refs[rng.randrange(len(self.refs))]
        index, side, price, shares = self.live[ref]
        kind = rng.choices("ECXDU", weights=(22, 8, 15, 35, 20))[0]
        locate, ns = index + 1, self.ns()
        if kind in "ECX":
            part = shares if rng.random() < 0.3 else rng.randint(1, shares)
            length = {"E": 31, "C": 36, "X": 23}[kind]
            buf = _head(kind.encode(), length, locate, ns)
            struct.pack_into(">QI", buf, 11, ref, part)
            if kind != "X":
                struct.pack_into(">Q", buf, 23, self.match)
                self.match += 1
            if kind == "C":
                buf[31:32] = b"Y" if rng.random() < 0.7 else b"N"
                struct.pack_into(">I", buf, 32, price + rng.choice((-100, 0, 100)))
            self.live[ref][3] -= part
            if self.live[ref][3] == 0:
                self._untrack(ref)
        elif kind == "D":
            buf = _head(b"D", 19, locate, ns)
            struct.pack_into(">Q", buf, 11, ref)
            self._untrack(ref)
        else:
            new_ref, self.next_ref = self.next_ref, self.next_ref + 1
            new_price = self.price(index, side) if rng.random() < 0.7 else price
            new_shares = rng.randint(1, 20) * 100
            buf = _head(b"U", 35, locate, ns)
            struct.pack_into(">QQII", buf, 11, ref, new_ref, new_shares, new_price)
            self._untrack(ref)
            self._track(new_ref, [index, side, new_price, new_shares])
        self.emit(buf)

    def trade(self) -> None:
        rng = self.rng
        index = rng.randrange(len(self.symbols))
        kind = rng.choices("PQBO", weights=(60, 15, 0, 0) if self.book_only else (60, 15, 10, 15))[0]
        locate, ns = index + 1, self.ns()
        if kind == "P":
            buf = _head(b"P", 44, locate, ns)
            struct.pack_into(">QcI", buf, 11, 0, rng.choice((b"B", b"S")), rng.randint(1, 50) * 10)
            buf[24:32] = self.stock(index)
            struct.pack_into(">IQ", buf, 32, self.mid[index] + rng.randint(-5, 5) * 100, self.match)
        elif kind == "Q":
            buf = _head(b"Q", 40, locate, ns)
            struct.pack_into(">Q", buf, 11, rng.randint(0, 5000))
            buf[19:27] = self.stock(index)
            struct.pack_into(">IQc", buf, 27, self.mid[index], self.match, rng.choice((b"O", b"C", b"H")))
        elif kind == "B":
            buf = _head(b"B", 19, locate, ns)
            struct.pack_into(">Q", buf, 11, max(1, self.match - 1))
        else:  # a message that moves no book: a retail interest indicator or an imbalance
            if rng.random() < 0.5:
                buf = _head(b"N", 20, locate, ns)
                buf[11:19] = self.stock(index)
                buf[19:20] = b"B"
            else:
                buf = _head(b"I", 50, locate, ns)
                buf[28:36] = self.stock(index)
        self.match += 1
        self.emit(buf)


def make_itch_capture(
    *, symbols: int = 50, orders: int = 2_000, seed: int = 5, book_only: bool = False
) -> ItchCapture:
    """A seeded ITCH 5.0 day (see the module docstring).

    Args:
        symbols: how many stocks (each gets a directory message).
        orders: how many orders are added over the day (messages: about 2.3 times as many).
        seed: the random seed (the same seed writes the same bytes).
        book_only: only messages that give a block (no ``S H B I N``): every message sent is
            one delivered, as a benchmark counts.
    """
    rng = random.Random(seed)
    names = [_symbol(i) for i in range(symbols)]
    day = _Day(rng, names, total=symbols + int(orders * 2.3) + 4, book_only=book_only)
    day.system(b"O")
    for index in range(symbols):
        day.directory(index)
    day.system(b"S")
    for index in range(0, symbols, 7):
        day.action(index)
    day.system(b"Q")
    added = 0
    while added < orders:
        roll = rng.random()
        if roll < 0.45 or not day.refs:
            day.add()
            added += 1
        elif roll < 0.95:
            day.touch()
        else:
            day.trade()
    day.system(b"M")
    day.system(b"C")
    return ItchCapture(b"".join(day.out), len(day.out), tuple(names), len(day.live))


def _symbol(index: int) -> str:
    letters = ""
    number = index
    for _ in range(4):
        letters += chr(ord("A") + number % 26)
        number //= 26
    return letters + (str(index // 456_976) if index >= 456_976 else "")
