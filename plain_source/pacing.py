"""Pacing: how many messages are due at a given time, with bounded catch-up.

Pure: the caller reads its clock and passes ``now``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MAX_CATCHUP_S: Final = 0.05  # never send more than this much backlog at once


@dataclass(slots=True)
class PacingSchedule:
    """A deadline schedule: message *k* is due at ``start + k / rate``.

    When the sender falls more than ``max_burst`` messages behind, the excess is
    forgiven (counted in ``forgiven``) rather than sent in one burst.

    Attributes:
        rate: messages per second; 0 or less means unpaced (always ``max_burst`` due).
        max_burst: the most messages :meth:`due` ever returns.
        start: the schedule's time origin (the caller's clock).
    """

    rate: float
    max_burst: int
    start: float
    credited: int = 0
    forgiven: int = 0

    def due(self, now: float) -> int:
        """How many messages are due at ``now`` (call :meth:`take` with what was sent)."""
        if self.rate <= 0:
            return self.max_burst
        owed = int((now - self.start) * self.rate) - self.credited
        if owed > self.max_burst:
            self.forgiven += owed - self.max_burst
            self.credited += owed - self.max_burst
            owed = self.max_burst
        return max(owed, 0)

    def take(self, count: int) -> None:
        """Record that ``count`` messages were sent."""
        self.credited += count

    def next_deadline(self) -> float:
        """When the next message is due (``start`` if unpaced)."""
        return self.start if self.rate <= 0 else self.start + (self.credited + 1) / self.rate
