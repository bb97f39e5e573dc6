"""What this adapter's health is measured from, besides its own counters: peers, the machine, faults.

:class:`HealthSide` owns the figures the core gathers between two health
reports -- each peer's message rate and each backup's lag as last heard,
when the machine's CPU and memory are sampled next, and the internal faults
of the last minute -- and hands the :class:`~adapter.core.health.HealthMeter`
what it measures from them. It runs on the loop's thread only.
"""

from __future__ import annotations

from collections import deque
from typing import Final

from feedha.adapter.core import syncbus
from feedha.adapter.core.actions import SampleMachine
from feedha.adapter.core.health import HealthMeter, HealthSample, MachineSample
from feedha.adapter.core.sync_types import Role

__all__ = [
    "FAULT_LIMIT",
    "FAULT_WINDOW_S",
    "MACHINE_SAMPLE_S",
    "MEMORY_SAMPLE_S",
    "HealthSide",
]

MACHINE_SAMPLE_S: Final = 0.1  # how often CPU is measured (for the health score)
# How often the machine's available memory is measured with it: reading it costs a file of the
# kernel's parsed in Python (~60 µs warm), on the loop's thread, and it moves slowly.
MEMORY_SAMPLE_S: Final = 1.0
FAULT_LIMIT: Final = 5  # internal faults within FAULT_WINDOW_S that make the adapter fail itself
FAULT_WINDOW_S: Final = 60.0


class HealthSide:
    """The peers' figures, the machine's sampling timers and the fault window, for the health meter.

    Args:
        meter: the health meter these figures feed.
        peer_timeout_s: a peer's figure older than this no longer counts.
        now: the monotonic clock at start-up (the machine is sampled at once).
    """

    def __init__(self, meter: HealthMeter, *, peer_timeout_s: float, now: float) -> None:
        self.meter = meter
        self._timeout = peer_timeout_s
        self._peer_rates: dict[int, tuple[float, float]] = {}  # adapter -> (message rate, heard at)
        self._peer_lags: dict[int, tuple[int, float]] = {}  # a backup -> (its lag, heard at)
        self._faults: deque[float] = deque(maxlen=FAULT_LIMIT)
        self._next_sample = now  # when the machine's figures are measured next
        self._next_memory_sample = now  # when the available memory is measured with them next

    def sample_due(self, now: float) -> SampleMachine | None:
        """The machine's figures to measure now (memory too, less often), or ``None``: not yet."""
        if now < self._next_sample:
            return None
        self._next_sample = now + MACHINE_SAMPLE_S
        memory = now >= self._next_memory_sample
        if memory:
            self._next_memory_sample = now + MEMORY_SAMPLE_S
        return SampleMachine(memory=memory)

    def on_machine_sample(self, sample: MachineSample) -> None:
        """The latest memory and CPU figures of this process's machine."""
        self.meter.on_machine_sample(sample)

    def on_peer_health(self, msg: syncbus.Health, *, now: float) -> None:
        """A peer's health report: its message rate, and its lag while it is a backup."""
        sender = msg.sender
        self._peer_rates[sender.adapter] = (msg.message_rate, now)
        if sender.role is Role.BACKUP:
            self._peer_lags[sender.adapter] = (msg.lag, now)
        else:
            self._peer_lags.pop(sender.adapter, None)

    def measure(self, *, now: float, numbered: int, errors: int, lag: int) -> HealthSample:
        """Measure this adapter's health now, with the peers' figures that are fresh."""
        timeout = self._timeout
        fresh = [rate for rate, heard in self._peer_rates.values() if now - heard <= timeout]
        return self.meter.measure(
            now=now,
            numbered=numbered,
            errors=errors,
            lag=lag,
            group_rate=max(fresh, default=0.0),
            peer_lags=[lag for lag, heard in self._peer_lags.values() if now - heard <= timeout],
        )

    def fault(self, now: float) -> bool:
        """Book an internal fault at ``now``: whether :data:`FAULT_LIMIT` came within the window."""
        self._faults.append(now)
        return len(self._faults) == FAULT_LIMIT and now - self._faults[0] <= FAULT_WINDOW_S
