"""The chaos drill's honest rate: each adapter's CPU per message before a flood and during it.

A flood (``feedha/drills/chaos_captures.py``: order references that collide in a hash table, a run
of new best prices, a crowd of new symbols) is fair input a venue may send; what it must not
do is make every message dearer. :class:`CostSampler` reads, twice a second, every working
adapter's process CPU time (user + system) and the source position it has reached (its
status' ``last_source_seq``). :func:`flood_costs` then sums, over the intervals between two
samples of one process that lie wholly inside a stretch of source positions, the CPU spent
and the positions passed: the per-message cost of the stretch. It compares each flood's
stretch with the stretch of honest traffic before the first flood; ``held`` is the cost during the
flood at most :data:`MAX_SLOWDOWN` times the cost before.

CPU time, not wall time: the other processes of a shared machine slow an adapter's clock but
not its CPU per message. Intervals of an adapter that was stopped, restarted or settling are
not sampled (the drill says which adapters are working).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import psutil

from feedha.cluster import control
from feedha.drills.chaos_captures import Flood

__all__ = ["MAX_SLOWDOWN", "CostSample", "CostSampler", "flood_costs"]

MAX_SLOWDOWN: Final = 2.0
SAMPLE_S: Final = 0.5
_STATUS_TIMEOUT_S: Final = 0.5


@dataclass(frozen=True, slots=True)
class CostSample:
    """One adapter process' CPU seconds when it had reached ``source_seq``."""

    pid: int
    cpu_s: float
    source_seq: int


Target = tuple[int, str]  # (pid, control endpoint) of an adapter that is working


class CostSampler:
    """Samples the working adapters on a thread of its own until :meth:`stop` (see the module docstring).

    Args:
        targets: the adapters to sample now, as ``(pid, control endpoint)``.
    """

    def __init__(self, targets: Callable[[], Sequence[Target]]) -> None:
        self._targets = targets
        self.samples: list[CostSample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="chaos-cost", daemon=True)

    def __repr__(self) -> str:
        return f"<CostSampler [samples={len(self.samples)}]>"

    def __enter__(self) -> CostSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            for pid, endpoint in self._targets():
                sample = _sample(pid, endpoint)
                if sample is not None:
                    self.samples.append(sample)


def _sample(pid: int, endpoint: str) -> CostSample | None:
    try:
        before = psutil.Process(pid).cpu_times()
        status = control(endpoint, "status", timeout=_STATUS_TIMEOUT_S)
    except (psutil.Error, TimeoutError, OSError):
        return None
    seq = status.get("last_source_seq")
    if not isinstance(seq, int):
        return None
    # The position is read after the CPU time: a message converted in between is counted, its
    # CPU not yet (a bias of one status call's worth, the same before a flood and during it).
    return CostSample(pid, before.user + before.system, seq)


def _stretch_cost(samples: Sequence[CostSample], low: int, high: int) -> tuple[float, int]:
    """CPU seconds and positions over the intervals that lie wholly in ``[low, high]``."""
    cpu, passed = 0.0, 0
    last: dict[int, CostSample] = {}
    for sample in samples:
        previous = last.get(sample.pid)
        last[sample.pid] = sample
        if previous is None or sample.source_seq <= previous.source_seq:
            continue
        if low <= previous.source_seq and sample.source_seq <= high:
            cpu += sample.cpu_s - previous.cpu_s
            passed += sample.source_seq - previous.source_seq
    return cpu, passed


def flood_costs(
    samples: Sequence[CostSample], floods: Sequence[Flood], baseline: tuple[int, int]
) -> dict[str, dict[str, Any]]:
    """Per flood: the µs of CPU a message before the floods (``baseline``, a ``source_seq``
    range) and during it, their ratio and whether it held."""
    report: dict[str, dict[str, Any]] = {}
    before_cpu, before_n = _stretch_cost(samples, *baseline)
    for flood in floods:
        during_cpu, during_n = _stretch_cost(samples, flood.first_seq, flood.last_seq)
        before_us = 1e6 * before_cpu / before_n if before_n else None
        during_us = 1e6 * during_cpu / during_n if during_n else None
        ratio = during_us / before_us if before_us and during_us is not None else None
        report[flood.name] = {
            "before_us": None if before_us is None else round(before_us, 2),
            "during_us": None if during_us is None else round(during_us, 2),
            "ratio": None if ratio is None else round(ratio, 2),
            "messages": [before_n, during_n],
            "held": ratio is not None and ratio <= MAX_SLOWDOWN,
        }
    return report
