"""Health: the figures an adapter reports and the score backups are ranked by.

The score is a pure function of a :class:`HealthSample` so the ranking rules
(rule 5: the least healthy backup fails itself; rule 6: the healthiest in-sync
backup promotes itself) can be tested with made-up figures. The runner fills
the sample from psutil and its own counters.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

MEMORY_COMFORT_MB: Final = 512.0
LAG_PER_POINT: Final = 100.0
# The lag a backup is judged by is the smallest of its last this many health samples: a backup
# that keeps up is behind only for a moment (a batch it has not read yet, a report it has not
# caught up with, a scheduling delay on a busy machine), one that cannot keep up is behind in
# every sample. At the health interval (0.1 s) a lag has to last half a second to count.
LAG_WINDOW_SAMPLES: Final = 5
MIN_GROUP_RATE: Final = 100.0  # msg/s below which rates say nothing about health


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthSample:
    """Raw health figures of one adapter at one moment."""

    available_memory_mb: float
    cpu_percent: float  # of one core, for this process
    error_count: int  # errors in the recent window (malformed frames, conversion errors, ...)
    message_rate: float  # source messages/s converted (numbered)
    lag: int  # source messages behind the active (negative when ahead)
    penalty: float = 0.0  # operator- or test-imposed handicap
    group_rate: float = 0.0  # the fastest live peer's message rate (0: none known)
    group_lag: int = 0  # the lag every live backup shares: the least any reports, this one's included


def health_score(sample: HealthSample) -> float:
    """Reduce a sample to a score in [0, 100]; higher is healthier.

    The weights say what makes a backup a poor successor: a saturated CPU (it
    will fall behind after promotion), memory pressure, recent errors, lag,
    and converting slower than the fastest of its group. Only the lag beyond
    what the whole group shares counts: when the source outruns every adapter
    (a burst), the backups are all behind the active, and none of them is the
    worse successor for it.
    """
    score = 100.0
    score -= 0.3 * min(max(sample.cpu_percent, 0.0), 100.0)
    score -= 20.0 * max(0.0, 1.0 - sample.available_memory_mb / MEMORY_COMFORT_MB)
    score -= min(20.0, 2.0 * sample.error_count)
    score -= min(20.0, max(0, abs(sample.lag) - sample.group_lag) / LAG_PER_POINT)
    if sample.group_rate >= MIN_GROUP_RATE:
        # Converting slower than the group means falling behind after a promotion.
        score -= 20.0 * max(0.0, 1.0 - sample.message_rate / sample.group_rate)
    score -= sample.penalty
    return max(0.0, min(100.0, score))


ERROR_WINDOW_S: Final = 10.0  # errors count toward health for this long


@dataclass(frozen=True, slots=True, kw_only=True)
class MachineSample:
    """What the machine says about this process (the runner measures it).

    Attributes:
        available_memory_mb: the machine's available memory (``None``: not measured this time,
            the last figure stands).
        cpu_percent: this process's CPU since the last sample, in % of one core.
    """

    available_memory_mb: float | None
    cpu_percent: float


class HealthMeter:
    """Turns the adapter's counters and the latest machine sample into a :class:`HealthSample`.

    Pure: the caller passes the time and the cumulative figures in. The
    message rate is measured between two samples; errors count only while
    they are younger than ``error_window_s`` (a burst an hour ago says
    nothing about the adapter now); the lag is the smallest of the last
    :data:`LAG_WINDOW_SAMPLES` readings (:attr:`lag`), so a moment's lag does
    not move the score, the ranking of backups or the registry's BEHIND.

    Args:
        penalty: the operator's or a drill's handicap on the score.
        now: the clock at start-up.
        error_window_s: how long an error lowers the score.
    """

    __slots__ = (
        "penalty",
        "_memory_mb",
        "_cpu_percent",
        "_rate_mark",
        "_error_marks",
        "_error_window_s",
        "_lags",
        "_lag",
    )

    def __init__(self, *, penalty: float, now: float, error_window_s: float = ERROR_WINDOW_S) -> None:
        self.penalty = penalty
        self._memory_mb, self._cpu_percent = MEMORY_COMFORT_MB, 0.0  # the latest machine figures
        self._rate_mark = (now, 0)
        self._error_marks: deque[tuple[float, int]] = deque([(now, 0)])
        self._error_window_s = error_window_s
        self._lags: deque[int] = deque(maxlen=LAG_WINDOW_SAMPLES)  # the last raw lag readings
        self._lag = 0

    def __repr__(self) -> str:
        return (
            f"<HealthMeter [penalty={self.penalty}, memory_mb={self._memory_mb:.0f}, "
            f"cpu_percent={self._cpu_percent:.1f}]>"
        )

    def on_machine_sample(self, sample: MachineSample) -> None:
        """Keep the latest machine figures (a memory figure not measured keeps the last one)."""
        if sample.available_memory_mb is not None:
            self._memory_mb = sample.available_memory_mb
        self._cpu_percent = sample.cpu_percent

    @property
    def lag(self) -> int:
        """The lag of the last sample: the smallest of the last readings (0 before any)."""
        return self._lag

    def measure(
        self,
        *,
        now: float,
        numbered: int,
        errors: int,
        lag: int,
        group_rate: float,
        peer_lags: Iterable[int] = (),
    ) -> HealthSample:
        """A sample at ``now`` from the cumulative numbered-message and error counts and this
        moment's ``lag`` (the sample's lag is the smallest of the last readings); ``peer_lags``:
        what the other live backups reported (the group's shared lag is the least of all)."""
        mark_time, mark_count = self._rate_mark
        rate = (numbered - mark_count) / max(now - mark_time, 1e-6)
        self._rate_mark = (now, numbered)
        marks = self._error_marks
        marks.append((now, errors))
        while len(marks) > 1 and now - marks[1][0] >= self._error_window_s:
            marks.popleft()
        lags = self._lags
        lags.append(lag)
        self._lag = min(lags, key=abs)
        group_lag = min((abs(peer) for peer in peer_lags), default=abs(self._lag))
        return HealthSample(
            available_memory_mb=self._memory_mb,
            cpu_percent=self._cpu_percent,
            error_count=errors - marks[0][1],
            message_rate=rate,
            lag=self._lag,
            penalty=self.penalty,
            group_rate=group_rate,
            group_lag=min(group_lag, abs(self._lag)),
        )
