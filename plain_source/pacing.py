"""Pacing: how many messages are due at a given time, with bounded catch-up; how late sends went out.

Pure: the caller reads its clock and passes ``now`` (and the send times).

The send loop sends what is due as soon as it is due: it sleeps until the
next message's deadline, wakes, and sends everything that fell due meanwhile
in as few frames as it may (at most ``batch`` messages each). Frames of many
messages form only under load -- when the sender or the machine is slower
than the rate -- never by holding a due message back for a tick or until
enough are due.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from typing import Final

MAX_CATCHUP_S: Final = 0.05  # never send more than this much backlog at once
_EPSILON: Final = 1e-6  # of a message: a message is due at its deadline whatever the float rounding
MAX_DELAY_SAMPLES: Final = 200_000  # sends whose delays are kept for the summary (bounded memory)


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
        # The epsilon keeps due() and next_deadline() in step: at the deadline itself
        # float rounding can make (now - start) * rate a hair below the integer.
        owed = int((now - self.start) * self.rate + _EPSILON) - self.credited
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

    def wait_s(self, now: float, *, end: float | None = None) -> float:
        """How long the sender may sleep from ``now``: until the next message is due, or ``end``; >= 0."""
        until = self.next_deadline() if end is None else min(self.next_deadline(), end)
        return max(0.0, until - now)


@dataclass(slots=True)
class PublishDelays:
    """How long after their event times the sends went out (event -> handed to ZeroMQ).

    Per send (all the frames that went out at one wake-up): the delay of its
    newest message (how late the sender woke) and of its oldest (how long
    the first of them waited). At most :data:`MAX_DELAY_SAMPLES` sends are
    kept; ``sends`` counts them all.
    """

    newest_ns: array[int] = field(default_factory=lambda: array("q"))
    oldest_ns: array[int] = field(default_factory=lambda: array("q"))
    sends: int = 0

    def record(self, *, sent_ns: int, oldest_event_ns: int, newest_event_ns: int) -> None:
        """Record one send of messages stamped ``oldest_event_ns`` .. ``newest_event_ns``."""
        self.sends += 1
        if len(self.newest_ns) < MAX_DELAY_SAMPLES:
            self.newest_ns.append(sent_ns - newest_event_ns)
            self.oldest_ns.append(sent_ns - oldest_event_ns)

    def summary(self) -> dict[str, object]:
        """``{"sends", "newest", "oldest"}``; each of the last two ``p50/p99/p99.9/max`` in µs."""
        return {"sends": self.sends, "newest": _percentiles_us(self.newest_ns),
                "oldest": _percentiles_us(self.oldest_ns)}  # fmt: skip


def _percentiles_us(samples_ns: array[int]) -> dict[str, float]:
    if not samples_ns:
        return {}
    ordered = sorted(samples_ns)

    def pick(share: float) -> float:
        return round(ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)] / 1000, 1)

    return {"p50": pick(0.5), "p99": pick(0.99), "p99.9": pick(0.999), "max": round(ordered[-1] / 1000, 1)}
