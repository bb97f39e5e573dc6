"""Symbol-filter benchmark: a client keeps 1, 10, 100 or 1,000 of 5,000 symbols.

The source generates 5,000 symbols; the subscriber joins the channel's lines,
arbitrates everything, decodes every delivered message and drops the ones
whose symbol it did not ask for (client-side filtering, as on multicast
lines). The figure is the client's processed rate (delivered msg/s, every
message arbitrated and decoded); the kept count and rate are parameters.

Ceiling, in the same run: the bare pyzmq PUB→SUB pair, unpaced, 100-byte messages.
"""

from __future__ import annotations

from typing import Any, Final

from feedha.bench.common import Figure, figure
from feedha.bench.pipeline import SOURCE_BATCHING, PipelineOptions, ceiling, open_log, run_pipeline

TOTAL_SYMBOLS: Final = 5_000
KEEP: Final = (1, 10, 100, 1_000)
QUICK_KEEP: Final = (1, 1_000)
OFFERED_RATE: Final = 250_000.0  # above what one group sustains here: the clients see its capacity
SECONDS: Final = 4.0
QUICK_SECONDS: Final = 1.5


def run(*, quick: bool = False) -> list[Figure]:
    """Measure the filtering client's delivered msg/s for each subscription size.

    Args:
        quick: two subscription sizes, shorter runs.

    Returns:
        One ``symbols`` figure per subscription size.
    """
    seconds = QUICK_SECONDS if quick else SECONDS
    figures: list[Figure] = []
    with open_log("symbols") as log:
        bare = ceiling(quick=quick, log=log)  # the throughput benchmark's bare pair
        for keep in QUICK_KEEP if quick else KEEP:
            result = run_pipeline(
                PipelineOptions(rate=OFFERED_RATE, seconds=seconds, symbols=TOTAL_SYMBOLS, keep_symbols=keep),
                log,
            )
            summary = result.clients[0][1]
            params: dict[str, Any] = {
                "subscribed_symbols": keep,
                "total_symbols": TOTAL_SYMBOLS,
                "sent": result.sent[0],
                "kept": summary["kept"],
                "kept_rate": round(result.client_rate(summary, kept=True), 1),
                "lost": result.lost,
                "undelivered": result.undelivered,
                "offered_rate": OFFERED_RATE,
                "seconds": seconds,
                "failovers": result.failovers,
                "source_batching": SOURCE_BATCHING,
                "adapters": "active + 1 backup",
                "quick": quick,
                "log": log.name,
            }
            figures.append(
                figure(
                    name="symbols",
                    value=result.client_rate(summary),
                    unit="msg/s",
                    ceiling=bare["rate"],
                    params=params,
                )
            )
    return figures
