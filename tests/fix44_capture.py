"""fix44 test captures written by a third-party FIX library (simplefix), and a reference book.

:func:`make_capture` writes a seeded market of many symbols: multi-symbol
incremental refreshes with all three update actions, level-indexed and
price-keyed books, full refreshes, session entries, heartbeats, a sequence
reset and a few malformed messages. :class:`Reference` rebuilds the books and
session values from the same messages independently of feedha (its own
parsing through simplefix, decimals, plain lists and dicts), so a test
compares feedha's engine with a second implementation of the rules.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import simplefix

SENDING_TIME = "20260105-14:30:00.000"
TRADE_TYPES = ("2", "4", "5", "6", "7", "8", "B", "C")


def _message(msg_type: str, seq: int, body: list[tuple[int, Any]]) -> bytes:
    msg = simplefix.FixMessage()
    msg.append_pair(8, "FIX.4.4", header=True)
    msg.append_pair(35, msg_type, header=True)
    msg.append_pair(49, "VENUE", header=True)
    msg.append_pair(56, "FEEDHA", header=True)
    msg.append_pair(34, seq, header=True)
    msg.append_pair(52, SENDING_TIME, header=True)
    for tag, value in body:
        msg.append_pair(tag, value)
    encoded: bytes = msg.encode()
    return encoded


def _price(rng: random.Random, base: int) -> str:
    cents = base * 100 + rng.randint(-50, 50)
    text = f"{cents / 100:.2f}"
    return text + "0" * rng.randint(0, 2)  # 101.5, 101.50 and 101.500 are one price


@dataclass
class Capture:
    """A capture: its messages, which are malformed, and the symbols' book kinds."""

    messages: list[bytes] = field(default_factory=list)
    malformed: set[int] = field(default_factory=set)  # source_seqs of malformed messages
    level_symbols: set[str] = field(default_factory=set)


def make_capture(*, symbols: int = 40, messages: int = 400, seed: int = 3, depth: int = 10) -> Capture:
    """A seeded capture (see the module docstring)."""
    rng = random.Random(seed)
    names = [f"S{i:04d}" for i in range(symbols)]
    capture = Capture(level_symbols={n for i, n in enumerate(names) if i % 2 == 0})
    levels: dict[tuple[str, str], int] = {}  # (symbol, side) -> levels a level book holds
    prices: dict[tuple[str, str], list[str]] = {}
    seq = 1
    for _ in range(messages):
        roll = rng.random()
        if roll < 0.04:
            capture.messages.append(_message("0", seq, []))
        elif roll < 0.06:
            capture.messages.append(_message("X", seq, [(268, 2), (279, 0), (269, "0"), (55, "BAD")]))
            capture.malformed.add(seq)
        elif roll < 0.12:
            capture.messages.append(
                _full_refresh(rng, seq, rng.choice(names), capture, levels, prices, depth)
            )
        else:
            capture.messages.append(_incremental(rng, seq, names, capture, levels, prices, depth))
        seq += 1
    reset_to = seq + 5
    capture.messages.append(_message("4", seq, [(123, "Y"), (36, reset_to)]))
    seq = reset_to
    for _ in range(20):
        capture.messages.append(_incremental(rng, seq, names, capture, levels, prices, depth))
        seq += 1
    return capture


def _incremental(
    rng: random.Random,
    seq: int,
    names: list[str],
    capture: Capture,
    levels: dict[tuple[str, str], int],
    prices: dict[tuple[str, str], list[str]],
    depth: int,
) -> bytes:
    entries: list[list[tuple[int, Any]]] = []
    for symbol in rng.sample(names, rng.randint(1, 4)):
        base = 50 + int(symbol[1:]) % 100
        for _ in range(rng.randint(1, 3)):
            entries.append(_entry(rng, symbol, base, capture, levels, prices, depth))
    body: list[tuple[int, Any]] = [(262, "req"), (268, len(entries))]
    for entry in entries:
        rng.shuffle(entry[2:])  # after 279 and 269, the fields come in any order
        body += entry
    return _message("X", seq, body)


def _entry(
    rng: random.Random,
    symbol: str,
    base: int,
    capture: Capture,
    levels: dict[tuple[str, str], int],
    prices: dict[tuple[str, str], list[str]],
    depth: int,
) -> list[tuple[int, Any]]:
    if rng.random() < 0.2:
        kind = rng.choice(TRADE_TYPES)
        fields: list[tuple[int, Any]] = [(279, 0), (269, kind), (55, symbol)]
        if kind != "B" and kind != "C":
            fields.append((270, _price(rng, base)))
        if kind in ("2", "B", "C"):
            fields.append((271, rng.randint(1, 900)))
        return fields
    side = rng.choice("01")
    if symbol in capture.level_symbols:
        held = levels.get((symbol, side), 0)
        action = 0 if held == 0 else rng.choice((0, 0, 1, 2))
        level = rng.randint(1, min(held + 1, depth + 2)) if action == 0 else rng.randint(1, held)
        levels[(symbol, side)] = min(depth, held + 1) if action == 0 else held - (action == 2)
        fields = [(279, action), (269, side), (55, symbol), (1023, level)]
        if action != 2:
            fields += [(270, _price(rng, base)), (271, rng.randint(1, 500)), (346, rng.randint(1, 9))]
        return fields
    known = prices.setdefault((symbol, side), [])
    if known and rng.random() < 0.35:
        price = known.pop(rng.randrange(len(known)))
        return [(279, 2), (269, side), (55, symbol), (270, price)]
    price = _price(rng, base)
    known.append(price)
    action = 1 if rng.random() < 0.3 else 0
    return [(279, action), (269, side), (55, symbol), (270, price), (271, rng.randint(1, 500))]


def _full_refresh(
    rng: random.Random,
    seq: int,
    symbol: str,
    capture: Capture,
    levels: dict[tuple[str, str], int],
    prices: dict[tuple[str, str], list[str]],
    depth: int,
) -> bytes:
    base = 50 + int(symbol[1:]) % 100
    entries: list[list[tuple[int, Any]]] = []
    for side in "01":
        count = rng.randint(0, depth)
        if symbol in capture.level_symbols:
            levels[(symbol, side)] = count
            for level in range(1, count + 1):
                entries.append(
                    [(269, side), (270, _price(rng, base)), (271, rng.randint(1, 99)), (1023, level)]
                )
        else:
            prices[(symbol, side)] = [_price(rng, base) for _ in range(count)]
            entries += [[(269, side), (270, p), (271, rng.randint(1, 99))] for p in prices[(symbol, side)]]
    entries.append([(269, "2"), (270, _price(rng, base)), (271, 7)])
    entries.append([(269, "6"), (270, _price(rng, base))])
    body: list[tuple[int, Any]] = [(55, symbol), (268, len(entries))]
    for entry in entries:
        body += entry
    return _message("W", seq, body)


class Reference:
    """Books and session values rebuilt from a capture with no feedha code (see the module docstring)."""

    def __init__(self, depth: int = 10) -> None:
        self.depth = depth
        self.books: dict[str, dict[str, Any]] = {}
        self.stats: dict[str, dict[str, Any]] = {}

    def feed(self, data: bytes) -> None:
        parser = simplefix.FixParser()
        parser.append_buffer(data)
        while (msg := parser.get_message()) is not None:
            self._message(msg)

    def _message(self, msg: simplefix.FixMessage) -> None:
        msg_type = msg.get(35).decode()
        if msg_type not in ("X", "W"):
            return
        pairs = [(int(tag), value.decode()) for tag, value in msg.pairs]
        start = 279 if msg_type == "X" else 269
        entries: list[dict[int, str]] = []
        for tag, value in pairs[pairs.index((268, msg.get(268).decode())) + 1 :]:
            if tag == start:
                entries.append({})
            if entries and tag not in (10,):
                entries[-1][tag] = value
        if int(msg.get(268)) != len(entries) or any(269 not in e for e in entries):
            return  # malformed: not applied at all
        if any(
            e[269] in ("0", "1", "2") and e.get(279, "0") != "2" and (270 not in e or 271 not in e)
            for e in entries
        ):
            return
        if msg_type == "W":
            self._refresh(msg.get(55).decode(), entries)
        else:
            symbol = ""
            for entry in entries:
                symbol = entry.get(55, symbol)
                self._incremental(symbol, entry)

    def _book(self, symbol: str) -> dict[str, Any]:
        return self.books.setdefault(symbol, {"level": None, "0": [], "1": []})

    def _stats(self, symbol: str) -> dict[str, Any]:
        return self.stats.setdefault(
            symbol,
            {k: None for k in ("volume", "last", "high", "low", "open", "close", "vwap")}
            | {"_n": Decimal(0), "_q": Decimal(0)},
        )

    def _incremental(self, symbol: str, entry: dict[int, str]) -> None:
        kind, action = entry[269], entry.get(279, "0")
        if kind in ("0", "1"):
            book = self._book(symbol)
            if 1023 in entry:
                self._level(book, kind, action, entry)
            else:
                self._keyed(book, kind, action, entry)
            return
        if action == "2":
            return
        stats = self._stats(symbol)
        price = Decimal(entry[270]) if 270 in entry else None
        size = Decimal(entry[271]) if 271 in entry else None
        if kind == "2":
            stats["last"] = price
            stats["volume"] = (stats["volume"] or 0) + size
            stats["high"] = price if stats["high"] is None else max(stats["high"], price)
            stats["low"] = price if stats["low"] is None else min(stats["low"], price)
            stats["_n"] += price * size
            stats["_q"] += size
            stats["vwap"] = stats["_n"] / stats["_q"]
        elif kind in ("4", "5"):
            stats["open" if kind == "4" else "close"] = price
        elif kind == "7":
            stats["high"] = price if stats["high"] is None else max(stats["high"], price)
        elif kind == "8":
            stats["low"] = price if stats["low"] is None else min(stats["low"], price)
        elif kind == "B":
            stats["volume"] = size

    def _level(self, book: dict[str, Any], side: str, action: str, entry: dict[int, str]) -> None:
        if book["level"] is not True:
            book["level"] = True
            book["0"], book["1"] = book["0"][: self.depth], book["1"][: self.depth]
        levels: list[tuple[Decimal, Decimal]] = book[side]
        n = int(entry[1023])
        if action == "2":
            if n <= len(levels):
                levels.pop(n - 1)
            return
        level = (Decimal(entry[270]), Decimal(entry[271]))
        if action == "1" and n <= len(levels):
            levels[n - 1] = level
        elif n <= self.depth:
            levels.insert(min(n - 1, len(levels)), level)
            del levels[self.depth :]

    def _keyed(self, book: dict[str, Any], side: str, action: str, entry: dict[int, str]) -> None:
        if book["level"] is not False:
            book["level"] = False
            for s in "01":
                book[s] = dict(reversed(book[s])) if isinstance(book[s], list) else book[s]
        prices: dict[Decimal, Decimal] = book[side]
        price = Decimal(entry[270])
        if action == "2":
            prices.pop(price, None)
        else:
            prices[price] = Decimal(entry[271])

    def _refresh(self, symbol: str, entries: list[dict[int, str]]) -> None:
        book = self._book(symbol)
        sides = [e for e in entries if e[269] in ("0", "1")]
        book["level"] = any(1023 in e for e in sides)
        for side in "01":
            mine = [e for e in sides if e[269] == side]
            if book["level"]:
                mine.sort(key=lambda e: int(e.get(1023, 0)))
                book[side] = [(Decimal(e[270]), Decimal(e[271])) for e in mine[: self.depth]]
            else:
                book[side] = {Decimal(e[270]): Decimal(e[271]) for e in mine}
        stats = self._stats(symbol)
        names = {"2": "last", "4": "open", "5": "close", "7": "high", "8": "low"}
        for entry in entries:
            if entry[269] in names:
                stats[names[entry[269]]] = Decimal(entry[270])
            elif entry[269] == "B":
                stats["volume"] = Decimal(entry[271])

    def shown(self) -> dict[str, dict[str, list[list[float]]]]:
        """Every book as the drill prints it: best first, up to the depth, numbers as floats."""
        out: dict[str, dict[str, list[list[float]]]] = {}
        for symbol, book in self.books.items():
            sides = {}
            for side, name in (("0", "bids"), ("1", "asks")):
                levels = book[side]
                if isinstance(levels, dict):
                    levels = sorted(levels.items(), reverse=side == "0")
                sides[name] = [[float(p), float(s)] for p, s in levels[: self.depth]]
            out[symbol] = sides
        return out

    def shown_stats(self) -> dict[str, dict[str, float | None]]:
        """Every symbol's session values as the drill prints them (None: never set)."""
        return {
            symbol: {k: None if v is None else float(v) for k, v in stats.items() if not k.startswith("_")}
            for symbol, stats in self.stats.items()
        }
