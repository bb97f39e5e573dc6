"""The chaos drill's schedule of faults: seeded, pure (the same seed, the same plan).

:func:`plan_faults` draws, from one seed, what ``feedha drill chaos``
(:mod:`feedha.drills.chaos`) injects and when: a fault every few seconds
(:data:`GAP_S`), each kind by its weight, each with a duration and a draw
that picks its target when it runs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

KINDS: Final = ("kill", "stop", "restart", "stalled_subscriber", "replay_flood", "bad_control")
WEIGHTS: Final = (2, 2, 1, 1, 1, 1)
PROCESS_FAULTS: Final = frozenset({"kill", "stop", "restart", "busy"})
BUSY_WEIGHT: Final = 2  # with --busy: as often as a kill or a stop
GAP_S: Final = (3.0, 7.0)  # between one fault and the next
DURATION_S: Final = {
    "kill": (2.0, 5.0),
    "stop": (0.5, 3.0),
    "stalled_subscriber": (5.0, 20.0),
    "replay_flood": (2.0, 5.0),
    "busy": (0.5, 3.0),
}


@dataclass(frozen=True, slots=True)
class Fault:
    """One planned fault: when (seconds into the run), what, for how long, and a draw to pick its target."""

    at: float
    kind: str
    duration: float
    pick: float


def plan_faults(seed: int, seconds: float, *, busy: bool = False) -> list[Fault]:
    """The seeded schedule of faults over a run of ``seconds`` (pure: same seed, same plan).

    ``busy``: busy turns are drawn too (without, a seed's schedule is what it always was).
    """
    rng = random.Random(seed)
    kinds, weights = (KINDS, WEIGHTS) if not busy else ((*KINDS, "busy"), (*WEIGHTS, BUSY_WEIGHT))
    faults: list[Fault] = []
    at = rng.uniform(*GAP_S)
    while at < seconds - 2.0:
        kind = rng.choices(kinds, weights)[0]
        low, high = DURATION_S.get(kind, (0.0, 0.0))
        faults.append(Fault(round(at, 3), kind, round(rng.uniform(low, high), 3), rng.random()))
        at += rng.uniform(*GAP_S)
    return faults
