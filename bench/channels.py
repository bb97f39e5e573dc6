"""Channel scale-out benchmark: 1, 2 or 4 channels (adapter groups) in parallel.

Each channel has its own plain source process, its own group (active + 1
backup) and its own arbitrating client; every source sends at a fixed rate
above what one group sustains here (paced, so the sources do not take the
cores from the adapters). The figure is the total delivered msg/s over all channels
(all deliveries over the span from the first to the last). On a 2-core
machine this shows how the processes share the cores, not network scaling.

Ceiling, in the same run: the bare pyzmq PUB→SUB pair, unpaced, 100-byte messages.
"""

from __future__ import annotations

from typing import Any, Final

from feedha.bench.common import Figure, figure
from feedha.bench.throughput import SOURCE_TICK_S, PipelineOptions, ceiling, open_log, run_pipeline

CHANNELS: Final = (1, 2, 4)
QUICK_CHANNELS: Final = (1, 2)
OFFERED_RATE: Final = 120_000.0  # above what one group sustains here: the clients see its capacity
SECONDS: Final = 4.0
QUICK_SECONDS: Final = 1.5


def run(*, quick: bool = False) -> list[Figure]:
    """Measure total delivered msg/s for each number of channels.

    Args:
        quick: fewer channel counts, shorter runs.

    Returns:
        One ``channels`` figure per channel count.
    """
    seconds = QUICK_SECONDS if quick else SECONDS
    figures: list[Figure] = []
    with open_log("channels") as log:
        bare = ceiling(quick=quick, log=log)  # the throughput benchmark's bare pair
        for channels in QUICK_CHANNELS if quick else CHANNELS:
            result = run_pipeline(PipelineOptions(rate=OFFERED_RATE, seconds=seconds, channels=channels), log)
            params: dict[str, Any] = {
                "channels": channels,
                "sent": sum(result.sent),
                "delivered": sum(s["delivered"] for _ch, s in result.clients),
                "per_channel_rate": [round(result.client_rate(s), 1) for _ch, s in result.clients],
                "lost": result.lost,
                "undelivered": result.undelivered,
                "offered_rate": OFFERED_RATE,
                "seconds": seconds,
                "failovers": result.failovers,
                "source_tick_s": SOURCE_TICK_S,
                "adapters": "active + 1 backup per channel",
                "quick": quick,
                "log": log.name,
            }
            figures.append(
                figure(
                    name="channels",
                    value=result.total_rate(),
                    unit="msg/s",
                    ceiling=bare["rate"],
                    params=params,
                )
            )
    return figures
