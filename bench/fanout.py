"""Fan-out benchmark: 1, 2, 4, 8 subscribers on one channel; delivered msg/s per subscriber.

Each run is a fresh pipeline (:func:`bench.pipeline.run_pipeline`): the plain
source sends at a fixed rate above what one group sustains on this machine
(paced, not flooded: an unpaced source would take a core from the adapters), an
adapter group (active + 1 backup) publishes, and N bench clients, each joined to
both lines and arbitrating, count what they get. The figure is the mean of the clients'
delivered msg/s (first to last delivery); the slowest client and the lost
count are in the parameters.

Ceiling, in the same run: one bare pyzmq PUB with the same number of SUB
processes, unpaced, 100-byte messages (:func:`bench.ceiling.run_pair`), per subscriber.
"""

from __future__ import annotations

from typing import Any, Final

from feedha.bench.ceiling import run_pair
from feedha.bench.common import Figure, figure
from feedha.bench.pipeline import SOURCE_BATCHING, PipelineOptions, open_log, run_pipeline

SUBSCRIBERS: Final = (1, 2, 4, 8)
QUICK_SUBSCRIBERS: Final = (1, 4)
OFFERED_RATE: Final = 250_000.0  # above what one group sustains here: the clients see its capacity
SECONDS: Final = 4.0
QUICK_SECONDS: Final = 1.5
CEILING_COUNT: Final = 200_000
QUICK_CEILING_COUNT: Final = 50_000


def run(*, quick: bool = False) -> list[Figure]:
    """Measure per-subscriber delivered msg/s for each subscriber count.

    Args:
        quick: fewer subscriber counts, shorter runs.

    Returns:
        One ``fanout`` figure per subscriber count.
    """
    seconds = QUICK_SECONDS if quick else SECONDS
    figures: list[Figure] = []
    with open_log("fanout") as log:
        for subscribers in QUICK_SUBSCRIBERS if quick else SUBSCRIBERS:
            bare = run_pair(
                count=QUICK_CEILING_COUNT if quick else CEILING_COUNT, subscribers=subscribers, log=log
            )
            result = run_pipeline(
                PipelineOptions(rate=OFFERED_RATE, seconds=seconds, subscribers=subscribers), log
            )
            rates = [result.client_rate(summary) for _ch, summary in result.clients]
            params: dict[str, Any] = {
                "subscribers": subscribers,
                "sent": result.sent[0],
                "lost": result.lost,
                "undelivered": result.undelivered,
                "offered_rate": OFFERED_RATE,
                "seconds": seconds,
                "failovers": result.failovers,
                "source_batching": SOURCE_BATCHING,
                "duplicates": result.duplicates,
                "min_rate": round(min(rates), 1),
                "total_rate": round(sum(rates), 1),
                "ceiling_min_rate": round(bare["min_rate"], 1),
                "ceiling_lost": bare["lost"],
                "adapters": "active + 1 backup",
                "source": "plain source, paced, 200 symbols",
                "quick": quick,
                "log": log.name,
            }
            figures.append(
                figure(
                    name="fanout",
                    value=sum(rates) / len(rates),
                    unit="msg/s",
                    ceiling=bare["rate"],
                    params=params,
                )
            )
    return figures
