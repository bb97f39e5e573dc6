"""The figure shape every benchmark prints, and small timing helpers.

A figure is one JSON object::

    {"name": "journal_append", "value": 812345.6, "unit": "msg/s",
     "ceiling": 1402345.0, "ratio": 0.58, "params": {...}, "machine": {...}}

``ceiling`` is the same work done the plainest way (raw ZeroMQ, a buffered
file write, ...) measured in the same run, and ``ratio`` is ``value / ceiling``.
The pipeline's figures (``throughput``, ``latency``) also carry
``ceiling_shape`` and ``ratio_shape``: the same figure of the bare model of the
pipeline's own shape (source, one relay per adapter, a client reading every
line; :mod:`bench.shape`) measured in the same run, and the value over it. The
pipeline's latency figures carry ``ceiling_shape_held`` and ``ratio_shape_held``
too: the same over the held model, whose backups' relays forward once a heartbeat
interval, as a backup's output gate lets its output out.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import random
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

Figure = dict[str, Any]
# ``bench latency --rounds``'s bound (each round at 50k msg/s is ~40 s of runs), here so that
# the command line checks it without importing the benchmark.
MAX_LATENCY_ROUNDS: Final = 9


@functools.cache
def machine() -> dict[str, Any]:
    """Describe the machine and library versions the figures were measured with.

    Returns:
        ``cores``, ``cpu_model``, ``python``, ``pyzmq``, ``libzmq``, ``platform``.
    """
    cpu_model = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            for line in file:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    pyzmq: str | None
    libzmq: str | None
    try:
        import zmq

        pyzmq, libzmq = zmq.__version__, zmq.zmq_version()
    except ImportError:
        pyzmq = libzmq = None
    return {
        "cores": os.cpu_count(),
        "cpu_model": cpu_model,
        "python": platform.python_version(),
        "pyzmq": pyzmq,
        "libzmq": libzmq,
        "platform": platform.platform(),
    }


def figure(
    *,
    name: str,
    value: float,
    unit: str,
    ceiling: float | None,
    params: Mapping[str, Any],
    ceiling_shape: float | None = None,
    ceiling_shape_held: float | None = None,
) -> Figure:
    """Build one figure.

    Args:
        name: what was measured, e.g. ``"journal_append"``.
        value: the measurement.
        unit: its unit, e.g. ``"msg/s"`` or ``"MB/s"``.
        ceiling: the same work done the plainest way in the same run (``None``: no ceiling).
        params: the parameters of the run (message count, sizes, policies...).
        ceiling_shape: the same figure of the bare model of the pipeline's shape, same run
            (given: the figure has ``ceiling_shape`` and ``ratio_shape``; not given: neither key).
        ceiling_shape_held: the same figure of the held model (:mod:`bench.shape`: the
            backups' relays forward once a heartbeat interval, as a backup's output gate
            releases), same run (given: ``ceiling_shape_held`` and ``ratio_shape_held``).

    Returns:
        The figure as a JSON-ready dict.
    """
    item: Figure = {
        "name": name,
        "value": round(value, 1),
        "unit": unit,
        "ceiling": None if ceiling is None else round(ceiling, 1),
        "ratio": _ratio(value, ceiling),
        "params": dict(params),
        "machine": machine(),
    }
    if ceiling_shape is not None:
        item["ceiling_shape"] = round(ceiling_shape, 1)
        item["ratio_shape"] = _ratio(value, ceiling_shape)
    if ceiling_shape_held is not None:
        item["ceiling_shape_held"] = round(ceiling_shape_held, 1)
        item["ratio_shape_held"] = _ratio(value, ceiling_shape_held)
    return item


def _ratio(value: float, ceiling: float | None) -> float | None:
    return None if not ceiling else round(value / ceiling, 3)


def best_time(run: Callable[[], object], *, repeats: int) -> float:
    """The shortest wall time of ``repeats`` runs (the least disturbed by other load).

    Args:
        run: the work to time.
        repeats: how many runs.

    Returns:
        Seconds.
    """
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def format_figure(item: Figure, *, as_json: bool) -> str:
    """One line of output for a figure.

    Args:
        item: the figure.
        as_json: JSON (one object per line) rather than a human-readable line.

    Returns:
        The line.
    """
    if as_json:
        return json.dumps(item, sort_keys=True)
    ceiling = (
        "" if item["ceiling"] is None else f"  ceiling {item['ceiling']:>14,.1f}  ratio {item['ratio']:.3f}"
    )
    return f"{item['name']:<24} {item['value']:>14,.1f} {item['unit']:<6}{ceiling}"


def sample_payloads(count: int, *, seed: int = 7, max_entries: int = 3) -> list[bytes]:
    """``count`` encoded ``MarketUpdate`` payloads shaped like an adapter's (256 distinct, repeated).

    Each has 1..``max_entries`` entries and the symbol's state; the same seed
    gives the same bytes, so figures stay comparable from run to run.
    """
    from feedha.proto import market_pb2  # the benchmarks that need no payloads do not import protobuf

    rng = random.Random(seed)
    symbols = ["AAPL", "MSFT", "IBM", "GOOGL", "AMZN", "NVDA", "TSLA", "META"]
    t0 = 1_700_000_000_000_000_000
    distinct = []
    for i in range(256):
        update = market_pb2.MarketUpdate(
            symbol=rng.choice(symbols), event_time_ns=t0 + i, publish_time_ns=t0 + i
        )
        for _ in range(rng.randint(1, max_entries)):
            price, size = round(rng.uniform(10, 500), 2), rng.randint(1, 5000)
            update.entries.add(type=rng.randint(1, 3), price=price, size=size, notional=price * size)
        update.state.volume = rng.randint(0, 10**7)
        update.state.high, update.state.low, update.state.last = 501.5, 9.75, 123.25
        update.state.vwap, update.state.trade_count = 120.125, rng.randint(0, 10**5)
        distinct.append(update.SerializeToString())
    return [distinct[i % len(distinct)] for i in range(count)]
