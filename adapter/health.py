"""Health: the figures an adapter reports and the score backups are ranked by.

The score is a pure function of a :class:`HealthSample` so the ranking rules
(rule 5: the least healthy backup fails itself; rule 6: the healthiest in-sync
backup promotes itself) can be tested with made-up figures. The runner fills
the sample from psutil and its own counters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MEMORY_COMFORT_MB: Final = 512.0
LAG_PER_POINT: Final = 100.0


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthSample:
    """Raw health figures of one adapter at one moment."""

    available_memory_mb: float
    cpu_percent: float  # of one core, for this process
    error_count: int  # errors in the recent window (malformed frames, conversion errors, ...)
    message_rate: float  # messages/s published
    lag: int  # source messages behind the active (negative when ahead)
    penalty: float = 0.0  # operator- or test-imposed handicap


def health_score(sample: HealthSample) -> float:
    """Reduce a sample to a score in [0, 100]; higher is healthier.

    The weights say what makes a backup a poor successor: a saturated CPU (it
    will fall behind after promotion), memory pressure, recent errors and lag.
    """
    score = 100.0
    score -= 0.3 * min(max(sample.cpu_percent, 0.0), 100.0)
    score -= 20.0 * max(0.0, 1.0 - sample.available_memory_mb / MEMORY_COMFORT_MB)
    score -= min(20.0, 2.0 * sample.error_count)
    score -= min(20.0, abs(sample.lag) / LAG_PER_POINT)
    score -= sample.penalty
    return max(0.0, min(100.0, score))
