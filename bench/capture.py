"""A fix44 capture for the benchmarks: market data as a venue sends it, written once per run.

Incremental refreshes of 1 to 3 symbols (1 to 6 entries: New, Change and
Delete on price-keyed books about 15 prices deep, some trades), 200 symbols, seeded; written with
feedha's own FIX framing (the benchmarks measure feedha, not an encoder).
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Final

from feedha.proto import fix

__all__ = ["CAPTURE_DESCRIPTION", "CAPTURE_MESSAGES", "fix44_messages", "write_capture"]

CAPTURE_MESSAGES: Final = 400_000
CAPTURE_DESCRIPTION: Final = (
    "fix44 35=X incremental refreshes of 1-3 symbols (2-4 entries: New/Change/Delete on price-keyed "
    "books, trades), 200 symbols, book depth 10, seed 7"
)
_SYMBOLS: Final = tuple(f"S{i:03d}" for i in range(200))


def fix44_messages(count: int, *, seed: int = 7, start_seq: int = 1) -> list[bytes]:
    """``count`` incremental refreshes (see the module docstring)."""
    rng = random.Random(seed)
    held: dict[tuple[str, str], list[str]] = {}
    out = []
    for seq in range(start_seq, start_seq + count):
        entries: list[tuple[int, str | int]] = []
        symbols = rng.sample(_SYMBOLS, rng.randint(1, 3))
        n = 0
        for symbol in symbols:
            for _ in range(rng.randint(1, 2)):
                entries += _entry(rng, symbol, held)
                n += 1
        body: list[tuple[int, str | int]] = [
            (35, "X"), (49, "VENUE"), (56, "FEEDHA"), (34, seq), (52, "20260105-14:30:00.000"), (268, n)
        ]  # fmt: skip
        out.append(fix.encode_message(body + entries))
    return out


def _entry(
    rng: random.Random, symbol: str, held: dict[tuple[str, str], list[str]]
) -> list[tuple[int, str | int]]:
    if rng.random() < 0.15:
        return [
            (279, 0),
            (269, "2"),
            (55, symbol),
            (270, f"{rng.randint(9000, 11000) / 100:.2f}"),
            (271, 100),
        ]
    side = rng.choice("01")
    prices = held.setdefault((symbol, side), [])
    if prices and (len(prices) > 15 or rng.random() < 0.3):  # a venue's book stays a few levels deep
        return [(279, 2), (269, side), (55, symbol), (270, prices.pop(rng.randrange(len(prices))))]
    price = f"{rng.randint(9000, 11000) / 100:.2f}"
    action = 1 if price in prices else 0
    if not action:
        prices.append(price)
    return [(279, action), (269, side), (55, symbol), (270, price), (271, rng.randint(1, 500))]


def write_capture(count: int) -> Path:
    """Write ``count`` messages to a temporary file (the caller removes it)."""
    with tempfile.NamedTemporaryFile("wb", prefix="feedha-bench-fix44-", suffix=".fix", delete=False) as file:
        file.write(b"".join(fix44_messages(count)))
    return Path(file.name)
