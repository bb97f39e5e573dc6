"""CPU per message per process over a steady-state window (``psutil``), for the benchmarks' process trees.

A benchmark starts its processes, lets the stream settle, then takes two
samples of every process's CPU time (user + system, all its threads) a
window apart, well inside the source's send window: start-up (imports,
connections, the first messages) comes before the window and the drain after
it. Each process's cost is then its CPU seconds in the window as a share of
one core, and as microseconds per message of the stream in the window (a
paced source offers ``rate × window`` messages; in steady state every process
handles each of them once).

:func:`costs` is the arithmetic (pure); :func:`sample` and :func:`steady_window`
read the processes and the clock; :class:`RunWindow` is the same for an
unpaced run (``feedha bench itch50_day``), from its first delivery to its last.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

LEAD_SHARE: Final = 0.2  # of the send window: start-up excluded before the first sample
WINDOW_SHARE: Final = 0.6  # of the send window: what is measured (the rest is left for the drain)


@dataclass(frozen=True, slots=True)
class Sample:
    """CPU seconds per role at one moment (monotonic ``at``)."""

    at: float
    cpu: Mapping[str, float]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads); 0.0 once it is gone."""
    import psutil

    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def sample(pids: Mapping[str, int]) -> Sample:
    """Read every role's CPU seconds now.

    Args:
        pids: role (``"source"``, ``"active"``, ``"relay-1"`` ...) -> process id.
    """
    return Sample(at=time.monotonic(), cpu={role: cpu_seconds(pid) for role, pid in pids.items()})


def costs(first: Sample, last: Sample, *, messages: float) -> dict[str, dict[str, float | None]]:
    """Each role's CPU between two samples: share of one core and µs per message.

    Args:
        first: the sample at the window's start.
        last: the sample at its end.
        messages: messages of the stream in the window.

    Returns:
        role -> ``{"cpu_percent", "us_per_msg"}`` (``us_per_msg`` None without messages).
    """
    window = max(last.at - first.at, 1e-9)
    out: dict[str, dict[str, float | None]] = {}
    for role, used_at_end in last.cpu.items():
        used = max(0.0, used_at_end - first.cpu.get(role, 0.0))
        out[role] = {
            "cpu_percent": round(100 * used / window, 1),
            "us_per_msg": round(1e6 * used / messages, 2) if messages > 0 else None,
        }
    return out


def steady_window(
    pids: Mapping[str, int],
    *,
    rate: float,
    seconds: float,
    flowing: Callable[[], bool],
    timeout: float = 30.0,
) -> dict[str, Any]:
    """Measure every process's CPU over the steady part of a paced stream of ``seconds``.

    Waits until ``flowing()`` (the client has delivered), then samples at
    :data:`LEAD_SHARE` and again :data:`WINDOW_SHARE` of ``seconds`` later.
    The sleeps time the measurement window; they synchronize nothing.

    Args:
        pids: role -> process id.
        rate: the source's pace, msg/s (the window's messages are ``rate × window``).
        seconds: how long the source sends.
        flowing: true once messages reach the client.
        timeout: longest wait for ``flowing``.

    Returns:
        ``{"window_s", "messages", "rate", "processes": {role: {"cpu_percent", "us_per_msg"}}}``.

    Raises:
        TimeoutError: nothing flowed within ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while not flowing():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no delivery within {timeout:.0f} s: no CPU window")
        time.sleep(0.01)  # polling the client's progress events, bounded by the deadline
    time.sleep(LEAD_SHARE * seconds)
    first = sample(pids)
    time.sleep(WINDOW_SHARE * seconds)
    last = sample(pids)
    window = last.at - first.at
    return {
        "window_s": round(window, 3),
        "messages": round(rate * window),
        "rate": rate,
        "processes": costs(first, last, messages=rate * window),
    }


def rss_bytes(pid: int) -> int:
    """A process's resident set size in bytes; 0 once it is gone."""
    import psutil

    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


@dataclass
class RunWindow:
    """CPU per message over an unpaced run: from the first delivery to the last.

    An unpaced source has no rate to multiply a window by, so the window's
    messages are counted instead: :meth:`open` samples every process as soon
    as the client reports its first deliveries (start-up, imports and the
    capture's loading come before), :meth:`close` samples again once the
    client has delivered everything (before anything is stopped). The
    messages are the client's deliveries between the two (its progress
    events come every 0.1 s, so the first count may be up to 0.1 s old: the
    window then holds slightly more messages than it counts -- a bias of
    ``rate x 0.1 s`` over the run's count, 0.3 % at 30,000 msg/s and a
    million messages). Each process's resident memory is sampled with its
    CPU, so the run's memory growth is read from the same two moments.
    """

    pids: Mapping[str, int]
    first: Sample | None = None
    delivered_first: int = 0
    rss_first: dict[str, int] = field(default_factory=dict)
    result: dict[str, Any] | None = None

    def open(self, delivered: Callable[[], int], *, timeout: float = 60.0) -> None:
        """Wait (bounded) for the first deliveries, then take the first sample.

        Raises:
            TimeoutError: nothing delivered within ``timeout``.
        """
        deadline = time.monotonic() + timeout
        while (count := delivered()) <= 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no delivery within {timeout:.0f} s: no CPU window")
            time.sleep(0.005)  # polling the client's progress events, bounded by the deadline
        self.first, self.delivered_first = sample(self.pids), count
        self.rss_first = {role: rss_bytes(pid) for role, pid in self.pids.items()}

    def close(self, delivered: int) -> dict[str, Any]:
        """The second sample: ``{"window_s", "messages", "rate", "processes", "rss_growth"}``."""
        if self.first is None:
            raise RuntimeError("RunWindow.close before open")
        last = sample(self.pids)
        rss = {role: rss_bytes(pid) - self.rss_first.get(role, 0) for role, pid in self.pids.items()}
        messages = max(0, delivered - self.delivered_first)
        window = max(last.at - self.first.at, 1e-9)
        self.result = {
            "window_s": round(window, 3),
            "messages": messages,
            "rate": round(messages / window, 1),
            "processes": costs(self.first, last, messages=messages),
            "rss_growth": rss,
        }
        return self.result


def compare(pipeline: Mapping[str, Any], shape: Mapping[str, Any]) -> dict[str, float | None]:
    """The pipeline's CPU per message over the bare model's, role by role.

    ``active_over_relay``: the active adapter over the relays' mean;
    ``backup_over_relay``: the backups' mean over it; ``client_over_bare_client``
    and ``source_over_bare_source`` likewise.

    Args:
        pipeline: :func:`steady_window`'s ``processes`` of the pipeline.
        shape: the same of the bare model (roles ``source``, ``relay-N``, ``client``).
    """

    def mean(rows: Mapping[str, Any], prefix: str) -> float | None:
        values = [
            float(v["us_per_msg"])
            for role, v in rows.items()
            if (role == prefix or role.startswith(prefix + "-")) and v.get("us_per_msg")
        ]
        return sum(values) / len(values) if values else None

    def over(numerator: float | None, denominator: float | None) -> float | None:
        return round(numerator / denominator, 2) if numerator is not None and denominator else None

    relay = mean(shape, "relay")
    return {
        "active_over_relay": over(mean(pipeline, "active"), relay),
        "backup_over_relay": over(mean(pipeline, "backup"), relay),
        "client_over_bare_client": over(mean(pipeline, "client"), mean(shape, "client")),
        "source_over_bare_source": over(mean(pipeline, "source"), mean(shape, "source")),
    }
