"""What the conversion tables cost in memory: bytes per live order, per symbol and per price level.

``python -m feedha.bench.table_bytes [--scale F]`` prints one JSON object.
Each case runs in a fresh Python process (``python -m feedha.bench.table_bytes
--case NAME``), fills one table through the state the adapter keeps (the C
tables where built) and reports its RSS growth (``psutil``, after a
collection) over what it added:

* ``itch50_order``: live orders over 3,000 stocks at 400 prices a side (the
  ``itch50_orders`` benchmark's shape); ``itch50_order_own_level``: every
  order at a price of its own, so each also makes a price level (the worst
  case a sender can choose).
* ``itch50_symbol``: stocks with one live order each, less that order.
* ``fix44_symbol``: symbols with one bid and one offer each, less their two levels;
  ``fix44_level``: price levels, 2,000 a side on 250 symbols.
* ``feedha_fix_symbol``: feedha-fix symbols (the C fast path's state).

The budget's per-entry costs (:mod:`adapter.conversion.budget`) cover these
figures at their worst (just after an array doubles); docs/deployment.md
quotes both.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final

CASES: Final = (
    "itch50_order",
    "itch50_order_own_level",
    "itch50_symbol",
    "fix44_symbol",
    "fix44_level",
    "feedha_fix_symbol",
)
COUNTS: Final = {  # what each case adds at --scale 1
    "itch50_order": 1_000_000,
    "itch50_order_own_level": 1_000_000,
    "itch50_symbol": 100_000,
    "fix44_symbol": 100_000,
    "fix44_level": 1_000_000,
    "feedha_fix_symbol": 500_000,
}
STOCKS: Final = 3_000


def _rss() -> int:
    import psutil

    gc.collect()
    return int(psutil.Process().memory_info().rss)


def _itch_add(state: Any, ref: int, stock: str, price: int) -> None:
    from feedha.adapter.formats.itch50.parser import ItchMessage

    state.apply(ItchMessage(ref, stock, 0, (), kind="A", ref=ref, side=1 + ref % 2, shares=100, price=price))


def _itch_orders(count: int, *, own_level: bool) -> tuple[int, int]:
    from feedha.adapter.formats.itch50.state import MboState

    names = [f"S{index:05d}" for index in range(STOCKS)]
    state = MboState(depth=10, max_orders=count + STOCKS)
    for index, name in enumerate(names):  # the stocks first: their cost is not the orders'
        _itch_add(state, 10**12 + index, name, 1_000_000)
    before = _rss()
    for ref in range(1, count + 1):
        price = 1_000_000 + (ref if own_level else ref * 7919 % 400 * 100)
        _itch_add(state, ref, names[ref % STOCKS], price)
    return _rss() - before, len(state.orders) - STOCKS


def _itch_symbols(count: int) -> tuple[int, int]:
    from feedha.adapter.formats.itch50.state import MboState

    state = MboState(depth=10, max_symbols=count + 1)
    before = _rss()
    for index in range(count):
        _itch_add(state, index + 1, f"Z{index:07d}", 1_000_000)
    grown = _rss() - before
    per_order = 64  # the order each stock holds: about what itch50_order measures
    return grown - per_order * count, len(state.snapshot())


def _fix44(symbols: int, levels: int) -> tuple[int, int]:
    # Books adopted whole into the native state, then the Python objects dropped.
    from feedha.adapter.conversion.book import BookValues
    from feedha.adapter.conversion.state import SymbolValues
    from feedha.adapter.formats.fix44.engine import Fix44Engine

    state = Fix44Engine(depth=10).state
    state.max_symbols = symbols + 1
    before = _rss()
    for index in range(symbols):
        bids = [(100.0 - k / 100, 5.0, 1) for k in range(levels)]
        asks = [(100.5 + k / 100, 5.0, 1) for k in range(levels)]
        state.set_symbol(f"F{index:07d}", SymbolValues(book=BookValues(False, bids, asks)))
        del bids, asks
    return _rss() - before, len(state)


def _feedha_fix_symbols(count: int) -> tuple[int, int]:
    from feedha.adapter.conversion.state import SymbolValues
    from feedha.adapter.formats.feedha_fix.choice import make_engine
    from feedha.adapter.formats.feedha_fix.table import ConverterTable

    state = make_engine(ConverterTable.load()).state
    state.max_symbols = count + 1
    before = _rss()
    for index in range(count):
        state.set_symbol(f"X{index:07d}", SymbolValues(volume=1, last=1.5))
    return _rss() - before, len(state)


def measure(case: str, count: int) -> dict[str, Any]:
    """In this process: the RSS growth of one case and what it added (bytes per entry)."""
    cases: dict[str, Callable[[], tuple[int, int]]] = {
        "itch50_order": lambda: _itch_orders(count, own_level=False),
        "itch50_order_own_level": lambda: _itch_orders(count, own_level=True),
        "itch50_symbol": lambda: _itch_symbols(count),
        "fix44_symbol": lambda: _fix44_symbols(count),
        "fix44_level": lambda: _fix44_levels(count),
        "feedha_fix_symbol": lambda: _feedha_fix_symbols(count),
    }
    grown, added = cases[case]()
    return {"case": case, "added": added, "rss_bytes": grown, "bytes_each": round(grown / max(added, 1), 1)}


def _fix44_symbols(count: int) -> tuple[int, int]:
    grown, added = _fix44(count, 1)
    return grown - 2 * 56 * added, added  # less their two levels (about what fix44_level measures)


def _fix44_levels(count: int) -> tuple[int, int]:
    symbols = 250
    grown, _ = _fix44(symbols, count // symbols // 2)
    return grown, count // symbols // 2 * 2 * symbols


def main(argv: Sequence[str]) -> int:
    """Every case in a fresh process (or ``--case``: one, here); print one JSON object."""
    parser = argparse.ArgumentParser(
        prog="python -m feedha.bench.table_bytes", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--case", choices=CASES, help="run one case in this process")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="multiply every case's count (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    if not args.scale > 0:
        parser.error("--scale must be > 0")
    if args.case is not None:
        print(json.dumps(measure(args.case, max(1, round(COUNTS[args.case] * args.scale)))))
        return 0
    result = {}
    for case in CASES:
        out = subprocess.run(
            [sys.executable, "-m", "feedha.bench.table_bytes", "--case", case, "--scale", str(args.scale)],
            capture_output=True, text=True, timeout=1200, check=True,
        )  # fmt: skip
        result[case] = json.loads(out.stdout)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
