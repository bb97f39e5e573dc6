"""``itch50``'s poison: the chaos drill's stream, a seeded trading day with poison and floods in it.

:func:`itch50_stream` lays out, message by message, what ``feedha drill chaos --format
itch50`` plays: the seeded day of ``adapter/formats/itch50/day.py`` with, every
``poison_every`` messages, one poison of :data:`POISON_KINDS` in turn (each an ITCH 5.0
message laid out at the specification's offsets), and two floods:

* ``hash_flood``: adds of order references chosen so that the old unkeyed order table of
  ``adapter/conversion/_orders.c`` (splitmix64's invertible finalizer, masked, with linear
  probing) puts every one of them in the same slot at any table size up to 2**32 slots, then
  their deletes; one honest message after every three of them;
* ``new_best_prices``: adds of one stock's bids, each at a new best price (the whole side
  moves in a sorted array), then their deletes, best first; the same mix.

Each flood is a tenth of the messages in adds and as many deletes; they start a fifth and
55 % of the way into the day (:data:`FLOOD_AT`), after a stretch of honest traffic.

Flood messages are valid and delivered; what the group must deliver is counted by
``feedha/drills/chaos_captures.py`` from the stream itself. Pure.
"""

from __future__ import annotations

import struct
from collections import Counter, deque
from typing import Final

from feedha.adapter.formats.capture_face import Chaos
from feedha.adapter.formats.itch50.day import make_itch_capture
from feedha.proto import moldudp64

__all__ = ["CHAOS", "FLOOD_AT", "FLOOD_EVERY", "FLOODS", "POISON_KINDS", "colliding_refs", "itch50_stream"]

POISON_KINDS: Final = (
    "length_0",  # an empty message block
    "length_1",  # one byte
    "type_length_minus_1",  # an A one byte short
    "type_length_plus_1",  # an A one byte long
    "oversize_65530",  # the message that once took the group down (issue 58)
    "length_max_minus_1",  # 65,534 bytes
    "length_max",  # 65,535 bytes: the most a message block holds
    "unknown_type",
    "bad_side",
    "bad_printable",
    "empty_stock",
    "unknown_order",
    "duplicate_order",  # an add, its duplicate (the poison), its delete
    "zero_shares",
    "volume_overflow",  # a cross of 2**64 - 1 shares
    "max_values",  # an add at the highest price and shares, then its delete: both valid
)
_MASK: Final = (1 << 64) - 1
_K2: Final = 0xBF58476D1CE4E5B9
_K3: Final = 0x94D049BB133111EB
_K2_INVERSE: Final = pow(_K2, -1, 1 << 64)
_K3_INVERSE: Final = pow(_K3, -1, 1 << 64)
_FLOOD_SLOT: Final = 5  # the low 32 bits every flood reference's slot shares
_BEST_BASE: Final = 10_000_000  # $1,000.0000: above every honest bid of the day
FLOOD_EVERY: Final = 3  # one honest message after every this many flood messages
FLOODS: Final = ("hash_flood", "new_best_prices")  # in the order they come
FLOOD_AT: Final = (0.2, 0.55)  # where the floods start, as fractions of the honest day


def colliding_refs(count: int, *, slot: int = _FLOOD_SLOT) -> list[int]:
    """``count`` order references the old ``_orders.c`` table (``home_of``) puts in one slot.

    ``home_of`` is splitmix64's finalizer of the reference, masked by the table's size: the
    finalizer is a bijection, so its inverse of ``(k << 32) | slot`` (``slot`` < 2**32) gives
    references whose slots agree at every size up to 2**32. The one generator of such a set:
    ``bench/micro_itch50.py`` and the tests take theirs from here.
    """
    return [_unmix((k << 32) | slot) for k in range(1, count + 1)]


def _unxorshift(value: int, shift: int) -> int:
    x = value
    for _ in range(64 // shift + 1):
        x = value ^ (x >> shift)
    return x & _MASK


def _unmix(value: int) -> int:
    x = _unxorshift(value, 31)
    x = (x * _K3_INVERSE) & _MASK
    x = _unxorshift(x, 27)
    x = (x * _K2_INVERSE) & _MASK
    return _unxorshift(x, 30)


def _head(kind: bytes, length: int, locate: int = 1) -> bytearray:
    buf = bytearray(length)
    buf[0:1] = kind
    struct.pack_into(">HH", buf, 1, locate, 0)
    buf[5:11] = (34_200 * 10**9).to_bytes(6, "big")
    return buf


def _add(ref: int, side: bytes, shares: int, stock: bytes, price: int) -> bytes:
    buf = _head(b"A", 36)
    struct.pack_into(">Qc", buf, 11, ref, side)
    struct.pack_into(">I8sI", buf, 20, shares, stock.ljust(8), price)
    return bytes(buf)


def _delete(ref: int) -> bytes:
    buf = _head(b"D", 19)
    struct.pack_into(">Q", buf, 11, ref)
    return bytes(buf)


def _poison(kind: str, index: int, stock: bytes) -> list[tuple[bytes, bool]]:
    """The messages of one poison, each with whether it is the poison (the others are valid)."""
    ref = (1 << 63) + index  # never an honest reference (those start at 1,000,000,007)
    if kind == "duplicate_order":
        add = _add(ref, b"B", 100, stock, 10_000)
        return [(add, False), (add, True), (_delete(ref), False)]
    if kind == "max_values":
        return [(_add(ref, b"S", 0xFFFFFFFF, stock, 0xFFFFFFFF), False), (_delete(ref), False)]
    simple: dict[str, bytes] = {
        "length_0": b"",
        "length_1": b"A",
        "type_length_minus_1": _add(ref, b"B", 100, stock, 10_000)[:-1],
        "type_length_plus_1": _add(ref, b"B", 100, stock, 10_000) + b"\x00",
        "oversize_65530": b"A" + bytes(65_529),
        "length_max_minus_1": b"D" + bytes(65_533),
        "length_max": b"U" + bytes(65_534),
        "unknown_type": b"~" + bytes(18),
        "bad_side": _add(ref, b"X", 100, stock, 10_000),
        "empty_stock": _add(ref, b"B", 100, b"", 10_000),
        "unknown_order": _delete((1 << 64) - 1),
        "zero_shares": _add(ref, b"B", 0, stock, 10_000),
    }
    if kind == "bad_printable":
        buf = _head(b"C", 36)
        struct.pack_into(">QIQcI", buf, 11, ref, 1, 1, b"?", 10_000)
        return [(bytes(buf), True)]
    if kind == "volume_overflow":
        buf = _head(b"Q", 40)
        struct.pack_into(">Q8sIQc", buf, 11, _MASK, stock.ljust(8), 10_000, 1, b"O")
        return [(bytes(buf), True)]
    return [(simple[kind], True)]


def _flood(kind: str, size: int, stock: bytes) -> list[bytes]:
    if kind == "hash_flood":
        refs = colliding_refs(size)
        adds = [_add(ref, b"S", 100, stock, 500_000 + (i % 100) * 100) for i, ref in enumerate(refs)]
        return adds + [_delete(ref) for ref in refs]
    refs = [(1 << 62) + k for k in range(size)]
    adds = [_add(ref, b"B", 100, stock, _BEST_BASE + k) for k, ref in enumerate(refs)]
    return adds + [_delete(ref) for ref in reversed(refs)]  # the best first: the side moves again


def itch50_stream(
    total: int, *, seed: int, poison_every: int
) -> tuple[list[bytes], Counter[str], dict[str, tuple[int, int]]]:
    """About ``total`` messages (see the module docstring).

    Returns:
        The messages in order (message i is ``source_seq`` i + 1), the poison by kind, and each
        flood's first and last ``source_seq``.
    """
    flood_size = max(50, total // 10)
    # A day of n orders holds about 2.3 n messages; each flood adds twice its size.
    day = make_itch_capture(symbols=200, orders=max(100, int((total - 4 * flood_size) / 2.3)), seed=seed)
    honest = list(moldudp64.read_binary_file(day.data))
    stock = day.symbols[0].encode()
    starts = {int(len(honest) * at): name for at, name in zip(FLOOD_AT, FLOODS, strict=True)}
    out: list[bytes] = []
    poison: Counter[str] = Counter()
    floods: dict[str, tuple[int, int]] = {}
    pending: deque[bytes] = deque()  # flood messages still to interleave
    flood_name = ""
    for index, message in enumerate(honest):
        if index in starts:
            flood_name, pending = starts[index], deque(_flood(starts[index], flood_size, stock))
            floods[flood_name] = (len(out) + 1, 0)
        while pending and len(out) % (FLOOD_EVERY + 1) != FLOOD_EVERY:
            out.append(pending.popleft())
            if not pending:
                floods[flood_name] = (floods[flood_name][0], len(out))
        out.append(message)
        if poison_every and index % poison_every == poison_every - 1 and index > 2 * len(day.symbols):
            kind = POISON_KINDS[poison.total() % len(POISON_KINDS)]
            poison[kind] += 1
            out += [bytes_ for bytes_, _is_poison in _poison(kind, index, stock)]
    return out, poison, floods


CHAOS: Final = Chaos(kinds=POISON_KINDS, floods=FLOODS, stream=itch50_stream)
