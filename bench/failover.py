"""Failover benchmark: the failover drill (:func:`feedha.drills.failover.run_failover`) at several rates.

At 5k, 20k and 50k msg/s (quick: 5k only) the drill starts the plain source,
an adapter group (active + 2 backups) and an arbitrating client, kills the
active with SIGKILL halfway, and reports what the client got. Figures:
``failover_lost`` and ``failover_duplicates`` (messages; both must be 0)
and ``failover_switch_gap`` (the longest pause between two deliveries around
the kill, ms).

Ceiling: none. There is no bare-ZeroMQ equivalent of a failover, so these
figures carry ``ceiling: null`` (the bare pair would lose everything after
its publisher died); the throughput figures give the ZeroMQ reference.
"""

from __future__ import annotations

from typing import Any, Final

from feedha.bench.common import Figure, figure
from feedha.bench.pipeline import open_log
from feedha.drills.failover import run_failover
from feedha.drills.group import DrillOptions

RATES: Final = (5_000.0, 20_000.0, 50_000.0)
QUICK_RATES: Final = (5_000.0,)
SECONDS: Final = 8.0
QUICK_SECONDS: Final = 4.0


def run(*, quick: bool = False) -> list[Figure]:
    """Run the failover drill at each rate.

    Args:
        quick: one rate, a shorter run.

    Returns:
        Three figures per rate.
    """
    seconds = QUICK_SECONDS if quick else SECONDS
    figures: list[Figure] = []
    with open_log("failover") as log:
        for rate in QUICK_RATES if quick else RATES:
            result = run_failover(DrillOptions(rate=rate, seconds=seconds), log)
            params: dict[str, Any] = {
                "rate": rate,
                "lost": result["lost"],
                **{k: v for k, v in result.items() if k not in ("drill", "rate", "lost")},
                "quick": quick,
                "log": log.name,
            }
            figures += [
                figure(name="failover_lost", value=result["lost"], unit="msg", ceiling=None, params=params),
                figure(
                    name="failover_duplicates",
                    value=result["duplicates"] + result["out_of_order"],
                    unit="msg",
                    ceiling=None,
                    params=params,
                ),
                figure(
                    name="failover_switch_gap",
                    value=result["max_switch_gap_ms"],
                    unit="ms",
                    ceiling=None,
                    params=params,
                ),
            ]
    return figures
