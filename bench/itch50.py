"""itch50 for the benchmarks: the throughput ramp's ITCH capture, and RSS per million live orders.

``feedha bench itch50_orders`` measures what the market-by-order state costs
in memory: a fresh Python process (``python -m feedha.bench.itch50``) names
``STOCKS`` stocks, then adds ``ORDERS`` live orders over them through the
``itch50`` state's ordinary path (stage and commit, as the adapter does),
and reports its RSS growth (``psutil``) per live order, all in (the stocks'
share included: ``bytes_per_order``) and split (``stock_bytes``: naming the
stocks, each with an order added and deleted; ``order_bytes_per_order``: the
adds after that). Its ceiling is the same number of orders held the
plainest compact way Python has, one packed ``bytes`` of 17 bytes per order
in a dict by reference, measured in the same process. The same orders are
measured again in a second fresh process on the Python reference order
table (``--reference``), so the C table's saving is a ratio of one run.
``--stocks N`` names another count of stocks (``bench itch50_day`` passes
its day's).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from feedha.adapter.formats.itch50.day import make_itch_capture
from feedha.bench.common import Figure, figure

__all__ = ["ITCH_CAPTURE_DESCRIPTION", "ITCH_CAPTURE_ORDERS", "measure_in_child", "run", "write_itch_capture"]

ITCH_CAPTURE_ORDERS: Final = 60_000  # about 140,000 messages: a 3 s step up to ~45,000 msg/s
ITCH_CAPTURE_DESCRIPTION: Final = (
    "a seeded ITCH 5.0 day (adapter/formats/itch50/day.py): 2,000 stocks with a directory message each, "
    "~45% adds (A/F), executions E and C, cancels X, deletes D, replaces U, trades P, crosses Q "
    "(only messages that give a block); BinaryFILE, played as MoldUDP64 packets of what is due"
)
ORDERS: Final = 1_000_000
QUICK_ORDERS: Final = 200_000
STOCKS: Final = 3_000


def write_itch_capture(orders: int) -> Path:
    """Write a capture of ``orders`` added orders to a temporary file (the caller removes it)."""
    capture = make_itch_capture(symbols=2_000, orders=orders, seed=7, book_only=True)
    with tempfile.NamedTemporaryFile(
        "wb", prefix="feedha-bench-itch50-", suffix=".itch", delete=False
    ) as file:
        file.write(capture.data)
    return Path(file.name)


def _rss() -> int:
    import psutil

    gc.collect()
    return int(psutil.Process().memory_info().rss)


def measure(orders: int, *, native: bool = True, stocks: int = STOCKS) -> dict[str, Any]:
    """In this process: RSS growth of ``orders`` live orders in the itch50 state, and of the plain dict.

    Args:
        orders: how many live orders to add.
        native: the C order table (``False``: the Python reference's).
        stocks: over how many stocks (each named first, by an order added and deleted).
    """
    from feedha.adapter.formats.itch50.parser import ItchMessage
    from feedha.adapter.formats.itch50.state import MboState

    names = [f"S{index:05d}" for index in range(stocks)]
    state = MboState(depth=10, prefer_native=native)
    before = _rss()
    for index, stock in enumerate(names):  # the stocks first: their share is reported apart
        ref = 2**62 + index
        state.apply(ItchMessage(ref, stock, 0, (), kind="A", ref=ref, side=1, shares=100, price=1_000_000))
        state.apply(ItchMessage(ref, "", 0, (), kind="D", ref=ref))
    named = _rss()
    started = time.perf_counter()
    for ref in range(1, orders + 1):
        stock = names[ref % stocks]
        price = 1_000_000 + (ref * 7919 % 400) * 100
        state.apply(
            ItchMessage(ref, stock, 0, (), kind="A", ref=ref, side=1 + ref % 2, shares=100, price=price)
        )
    elapsed = time.perf_counter() - started
    grown = _rss() - before
    order_grown = grown - (named - before)
    plain_before = _rss()
    plain = {ref: ref.to_bytes(8, "big") + bytes(9) for ref in range(10**12, 10**12 + orders)}
    plain_grown = _rss() - plain_before
    assert len(state.orders) == orders and len(plain) == orders
    return {
        "orders": orders,
        "stocks": stocks,
        "native_order_table": state.orders.__class__.__module__.endswith("._orders"),
        "rss_bytes": grown,
        "bytes_per_order": grown / orders,
        "mb_per_million": grown / orders * 1e6 / 2**20,
        "stock_bytes": named - before,
        "order_bytes_per_order": order_grown / orders,
        "order_table_bytes": state.orders.__sizeof__() if native else None,
        "plain_dict_bytes_per_order": plain_grown / orders,
        "add_us": elapsed / orders * 1e6,
    }


def run(*, quick: bool = False) -> list[Figure]:
    """RSS per live order of the itch50 state, beside a dict of packed orders (both in one fresh process)."""
    orders = QUICK_ORDERS if quick else ORDERS
    result, reference = (measure_in_child(orders, flags) for flags in ([], ["--reference"]))
    return [
        figure(
            name="itch50_rss_per_order",
            value=result["bytes_per_order"],
            unit="bytes/order",
            ceiling=result["plain_dict_bytes_per_order"],
            params={
                **result,
                "reference_bytes_per_order": reference["bytes_per_order"],
                "reference_add_us": reference["add_us"],
                "what": "RSS growth (psutil) of a fresh process naming the stocks, then adding live orders "
                "through the itch50 state (the C order table, 20-byte records 1/2 to 3/4 full; levels per "
                "stock and side; shown books), per live order, the stocks' share in it (stock_bytes) and "
                "apart (order_bytes_per_order); reference_*: the same on the Python reference order "
                "table, another process",
                "ceiling_is": "a dict of ref -> 17 packed bytes per order, same process (lower is better)",
                "quick": quick,
            },
        )
    ]


def measure_in_child(orders: int, flags: list[str]) -> dict[str, Any]:
    """:func:`measure` in a fresh process (``flags``: ``["--reference"]`` for the Python order table)."""
    out = subprocess.run(
        [sys.executable, "-m", "feedha.bench.itch50", str(orders), *flags],
        capture_output=True, text=True, timeout=1200, check=True,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def main(argv: list[str]) -> int:
    """``python -m feedha.bench.itch50 [ORDERS] [--reference] [--stocks N]``: print :func:`measure`'s JSON."""
    parser = argparse.ArgumentParser(
        prog="python -m feedha.bench.itch50", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "orders", nargs="?", type=int, default=ORDERS, help="live orders (default: %(default)s)"
    )
    parser.add_argument("--reference", action="store_true", help="the Python reference order table")
    parser.add_argument("--stocks", type=int, default=STOCKS, help="stocks named (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.orders < 1 or args.stocks < 1:
        parser.error(f"orders and --stocks must be >= 1, got {args.orders} and {args.stocks}")
    print(json.dumps(measure(args.orders, native=not args.reference, stocks=args.stocks)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
