"""``fix44``'s poison: the chaos drill's stream, seeded market data with poison and floods in it.

:func:`fix44_stream` lays out what ``feedha drill chaos --format fix44`` plays: FIX 4.4
incremental refreshes (``35=X``) of one to three of 200 symbols -- New, Change and Delete on
price-keyed books about fifteen prices deep, trades, now and then a heartbeat -- with, every
``poison_every`` messages, one poison of :data:`POISON_KINDS` in turn, and three floods:

* ``symbol_flood``: 2,000 refreshes each naming a symbol never seen before (the symbol table
  grows by one a message), then refreshes of those symbols, fifteen of each on average;
* ``new_best_prices``: New bids of one symbol, each at a new best price, to the 5,000 prices
  a side keeps and 20 past it (quarantined, ``book_full``), then their Deletes, best first;
  then the same on another symbol, and another;
* ``deep_book``: one symbol's bids filled to the 5,000 prices a side keeps and its offers to
  4,000, fifty New a message, then Changes of its levels in which one message in sixteen
  carries an MDEntryID of non-ASCII text (the C run reads printable ASCII only and stops at
  it: the careful path converts it on a book of 9,000 levels) and one in sixteen is a New at
  a new bid price (``book_full``: refused by the careful path) -- a deep book's careful path,
  and a flood of refused entries. What the flood tests is the book's depth: a careful Change
  costs the same on the deep book as on a fifteen-price one (265 and 248 us in one process,
  measured when the C run took ``35=W``), about fifty times a message of the C run, so the
  share of careful messages, not the depth, sets the flood's cost a message; one in sixteen
  keeps that share well inside the drill's bound (one in eight, set when the C run cost twice
  what it does now, read 1.6-2.4 times the honest cost);

one honest message after every three flood messages, starting a fifth, 55 % and 80 % of the
way in (:data:`FLOOD_AT`). Sequence numbers (``34=``) run on over everything. Every message is
framed by ``proto.fix.frame``; the poison that is about framing edits its bytes after.

The symbol flood is 2,000 symbols: every checkpoint carries the whole state, so a crowd of
symbols makes every message pay a share of each checkpoint -- 22,500 new symbols measured
1.85x the honest cost a message, near the bound (docs/robustness.md); 2,000 test what the
symbol table does. Pure.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Callable
from typing import Final

from feedha.adapter.formats.capture_face import Chaos
from feedha.proto import fix

__all__ = ["CHAOS", "FLOOD_AT", "FLOOD_EVERY", "FLOODS", "POISON_KINDS", "fix44_stream"]

POISON_KINDS: Final = (
    "body_length_short",  # 9= one less than the body
    "body_length_long",  # 9= one more
    "body_length_zero",
    "body_over_six_digits",  # a body of 100,000 bytes: past what 9= is read as
    "bad_checksum",
    "count_plus_1",  # 268= one more than the entries
    "count_zero",  # 268=0 and no entry
    "count_huge",  # 268=999999
    "unknown_type",  # 35=ZZ: not market data, skipped
    "nan_price",
    "negative_size",
    "bad_action",  # 279=7
    "bad_entry_type",  # 269=Z
    "level_zero",  # 1023=0
    "oversize_block",  # two 33,000-byte symbols: the block would pass 64 KiB
    "seq_past_max",  # 34= past MAX_SOURCE_SEQ: no position (every adapter sees the same gap)
    "volume_overflow",  # two trades of 2**62
    "max_values",  # a 40-digit price and a 19-digit size, then its Delete: both valid
)
_SENDING: Final = b"20260105-14:30:00.000"
_FLOOD_SYMBOL: Final = "BEST"
FLOOD_EVERY: Final = 3  # one honest message after every this many flood messages
FLOODS: Final = ("symbol_flood", "new_best_prices", "deep_book")  # in the order they come
FLOOD_AT: Final = (0.2, 0.55, 0.8)  # where the floods start, as fractions of the run
_SIDE_PRICES: Final = 5_000  # what a price-keyed side keeps (adapter/conversion/book.py MAX_PRICES)
_PAST_FULL: Final = 20  # new best prices past a full side: quarantined, book_full
SYMBOL_FLOOD: Final = 2_000  # new symbols (each adds a checkpoint's worth of work: see below)
_DEEP_SYMBOL: Final = "DEEP"
_DEEP_ASKS: Final = 4_000  # the deep book's offers (its bids: a full side)
_DEEP_EVERY: Final = 16  # in the deep book's flood, one careful Change and one book_full in this many
_CAREFUL: Final = "278=\u00e9\x01".encode()  # valid UTF-8 the parser takes, past the C run's ASCII: a stop


def _message(seq: int, entries: list[bytes], *, msg_type: bytes = b"X", count: int | None = None) -> bytes:
    """One message: the header, 268= and the entries (each its fields, SOH-ended), framed."""
    head = b"35=%s\x0149=VENUE\x0156=FEEDHA\x0134=%d\x0152=%s\x01" % (msg_type, seq, _SENDING)
    if msg_type == b"X":
        head += b"268=%d\x01" % (len(entries) if count is None else count)
    return fix.frame(head + b"".join(entries))


def _fields(*pairs: tuple[int, str | int]) -> bytes:
    return b"".join(b"%d=%s\x01" % (tag, str(value).encode()) for tag, value in pairs)


def _new(symbol: str, side: str, price: str, size: str | int = 100) -> bytes:
    return b"279=0\x01269=%s\x0155=%s\x01270=%s\x01271=%s\x01" % (
        side.encode(),
        symbol.encode(),
        price.encode(),
        str(size).encode(),
    )


def _delete(symbol: str, side: str, price: str) -> bytes:
    return b"279=2\x01269=%s\x0155=%s\x01270=%s\x01" % (side.encode(), symbol.encode(), price.encode())


class _Market:
    """The honest stream's books: a few prices a side per symbol, as a venue keeps them."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.symbols = [b"S%03d" % i for i in range(200)]
        self.prices = [b"%d.%02d" % divmod(ticks, 100) for ticks in range(9_000, 11_001)]
        self.held: dict[tuple[bytes, bytes], list[int]] = {}

    def entries(self) -> list[bytes]:
        draw, out = self.rng.random, []
        # In the order drawn (a set's order of bytes changes with the interpreter's hash seed).
        for symbol in dict.fromkeys(self.symbols[int(draw() * 200)] for _ in range(1 + int(draw() * 3))):
            roll, tick = draw(), int(draw() * 2001)
            if roll < 0.15:
                out.append(b"279=0\x01269=2\x0155=%s\x01270=%s\x01271=100\x01" % (symbol, self.prices[tick]))
                continue
            side = b"0" if roll < 0.575 else b"1"
            held = self.held.setdefault((symbol, side), [])
            if held and (len(held) > 15 or draw() < 0.3):
                gone = self.prices[held.pop(int(draw() * len(held)))]
                out.append(b"279=2\x01269=%s\x0155=%s\x01270=%s\x01" % (side, symbol, gone))
                continue
            action = 1 if tick in held else 0
            if not action:
                held.append(tick)
            size = 1 + int(draw() * 500)
            out.append(
                b"279=%d\x01269=%s\x0155=%s\x01270=%s\x01271=%d\x01"
                % (action, side, symbol, self.prices[tick], size)
            )
        return out


def _poison(kind: str, seq: int) -> list[bytes]:
    """The messages of one poison at ``seq`` (and after it, for the kinds of two)."""
    base = _message(seq, [_new("S001", "0", "99.50")])
    length_at = base.index(b"\x019=") + 3
    length_end = base.index(b"\x01", length_at)
    true = int(base[length_at:length_end])

    def body_length(value: int) -> bytes:
        return base[:length_at] + b"%d" % value + base[length_end:]

    framing: dict[str, Callable[[], bytes]] = {
        "body_length_short": lambda: body_length(true - 1),
        "body_length_long": lambda: body_length(true + 1),
        "body_length_zero": lambda: body_length(0),
        "bad_checksum": lambda: base[:-4] + b"%03d\x01" % ((int(base[-4:-1]) + 1) % 256),
        "body_over_six_digits": lambda: _message(
            seq, [_new("S001", "0", "99.5") + b"58=" + b"x" * 100_000 + b"\x01"]
        ),
    }
    if kind in framing:
        return [framing[kind]()]
    entries: dict[str, tuple[list[bytes], int | None]] = {
        "count_plus_1": ([_new("S001", "0", "99.5")], 2),
        "count_zero": ([], 0),
        "count_huge": ([_new("S001", "0", "99.5")], 999_999),
        "nan_price": ([_new("S001", "0", "nan")], None),
        "negative_size": ([_new("S001", "0", "99.5", "-5")], None),
        "bad_action": ([_fields((279, 7), (269, "0"), (55, "S001"), (270, "99.5"), (271, 1))], None),
        "bad_entry_type": ([_new("S001", "Z", "99.5")], None),
        "level_zero": ([_new("S001", "0", "99.5") + b"1023=0\x01"], None),
        "oversize_block": ([_new("P" * 33_000, "0", "1"), _new("Q" * 33_000, "0", "1")], None),
    }
    if kind in entries:
        found, count = entries[kind]
        return [_message(seq, found, count=count)]
    if kind == "unknown_type":
        return [_message(seq, [], msg_type=b"ZZ")]
    if kind == "seq_past_max":
        return [fix.replace_field(base, 34, b"%d" % ((1 << 63) - 1))]
    trade = _new("OVERFLOW", "2", "1", 1 << 62)
    if kind == "volume_overflow":
        return [_message(seq, [trade]), _message(seq + 1, [trade])]
    # max_values: a 40-character price and a 19-digit size, then the Delete of that price
    price = "9" * 40
    add, delete = _new("S002", "1", price, "9" * 19), _delete("S002", "1", price)
    return [_message(seq, [add]), _message(seq + 1, [delete])]


def _flood(kind: str, size: int) -> list[list[bytes]]:
    """The flood's messages, each its entries (one, but for the deep book's opening)."""
    if kind == "symbol_flood":  # the new symbols, then refreshes of them, many times each
        rng, count = random.Random(size), min(SYMBOL_FLOOD, size // 4)
        news = [_new(f"F{k:06d}", "0", "10") for k in range(count)]
        again = [_new(f"F{rng.randrange(count):06d}", "1", f"{11 + k % 50}") for k in range(size - count)]
        return [[entry] for entry in news + again]
    if kind == "deep_book":
        return _deep_book(size)
    out: list[bytes] = []
    for number in range(max(1, size // (2 * _SIDE_PRICES))):  # one symbol's side after another
        symbol = f"{_FLOOD_SYMBOL}{number}"
        prices = [f"{1000 + k / 100:.2f}" for k in range(_SIDE_PRICES + _PAST_FULL)]
        out += [_new(symbol, "0", price) for price in prices]
        out += [_delete(symbol, "0", price) for price in reversed(prices[:_SIDE_PRICES])]
    return [[entry] for entry in out]


def _deep_book(size: int) -> list[list[bytes]]:
    """A full bid side and 4,000 offers on one symbol, then ``size`` Changes and refused News."""
    bids = [f"{1000 - k / 100:.2f}" for k in range(_SIDE_PRICES)]  # best first
    asks = [f"{1000.01 + k / 100:.2f}" for k in range(_DEEP_ASKS)]
    opening = [_new(_DEEP_SYMBOL, "0", price) for price in bids] + [
        _new(_DEEP_SYMBOL, "1", price) for price in asks
    ]
    out = [opening[at : at + 50] for at in range(0, len(opening), 50)]
    rng = random.Random(size)
    for k in range(size):
        side, prices = ("0", bids) if rng.random() < 0.5 else ("1", asks)
        change = b"279=1\x01269=%s\x0155=%s\x01270=%s\x01271=%d\x01" % (
            side.encode(),
            _DEEP_SYMBOL.encode(),
            prices[int(rng.random() * len(prices))].encode(),
            1 + k % 500,
        )
        if k % _DEEP_EVERY == 0:  # the careful path converts it, on the deep book
            out.append([change + _CAREFUL])
        elif k % _DEEP_EVERY == _DEEP_EVERY // 2:  # a new bid on the full side: book_full
            out.append([_new(_DEEP_SYMBOL, "0", f"{900 - (k % 10_000) / 100:.2f}")])
        else:
            out.append([change])
    return out


def fix44_stream(
    total: int, *, seed: int, poison_every: int
) -> tuple[list[bytes], Counter[str], dict[str, tuple[int, int]]]:
    """About ``total`` messages (see the module docstring).

    Returns:
        The messages in order, the poison by kind, and each flood's first and last ``source_seq``
        (its messages' own 34=; poison that has none still uses up a number).
    """
    market = _Market(seed)
    flood_size = max(50, total // 20)
    # Each flood starts at its place, or when the one before it ends (a short run: they follow on).
    starts = deque((int(total * at), name) for at, name in zip(FLOOD_AT, FLOODS, strict=True))
    out: list[bytes] = []
    poison: Counter[str] = Counter()
    floods: dict[str, tuple[int, int]] = {}
    pending: deque[list[bytes]] = deque()  # flood messages still to interleave (their entries)
    flood_name, index = "", 0
    while len(out) < total or pending or starts:
        if starts and index >= starts[0][0] and not pending:
            flood_name = starts.popleft()[1]
            pending = deque(_flood(flood_name, 3 * flood_size))
            floods[flood_name] = (len(out) + 1, 0)
        while pending and len(out) % (FLOOD_EVERY + 1) != FLOOD_EVERY:
            out.append(_message(len(out) + 1, pending.popleft()))
            if not pending:
                floods[flood_name] = (floods[flood_name][0], len(out))
        index += 1
        if index % 25 == 0:
            out.append(_message(len(out) + 1, [], msg_type=b"0"))  # a heartbeat: skipped, no block
        else:
            out.append(_message(len(out) + 1, market.entries()))
        if poison_every and index % poison_every == 0:
            kind = POISON_KINDS[poison.total() % len(POISON_KINDS)]
            poison[kind] += 1
            out += _poison(kind, len(out) + 1)
    return out, poison, floods


CHAOS: Final = Chaos(kinds=POISON_KINDS, floods=FLOODS, stream=fix44_stream)
