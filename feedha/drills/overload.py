"""``feedha drill overload``: a capture played at three times what the channel carries, the active killed.

A venue does not wait for its handlers: at the open it sends far more than a
channel converts. This drill plays a capture (``--file``, ``--format``) into
a group of an active and ``--backups`` backups with journals and a client
that keeps the books, in three steps:

1. **Capacity.** Unless ``--capacity`` gives it, a first group of the same
   shape is fed the capture as fast as it takes it for ``--measure-seconds``
   (the source waits for its slowest adapter), and the rate at which the
   client's position in the capture moves, after the first two seconds, is
   the channel's capacity C.
2. **Burst.** A fresh group is fed the capture at ``3 x C`` (``--burst-factor``)
   for ``--burst-seconds`` (10), then at ``C / 2`` (``--calm-factor``) until the
   end; ``--kill-after`` seconds into the burst the active is SIGKILLed.
   Nothing is dropped on the way: the source is held back by the slowest
   adapter (it reports the rate it achieved), the lines drop for a client that
   lags and the client fills the holes from the journals, and the group works
   off the backlog once the burst is over.
3. **Account.** Once the source is done and the group has settled, every
   message sent must have been booked by an adapter (``unaccounted``,
   :mod:`feedha.drills.accounting`) and every message the channel numbered must
   have reached the client (``lost``); the client's books and stats are compared
   with the capture converted by one adapter core alone
   (:mod:`feedha.drills.reference`).

The summary: ``sent``, ``delivered``, ``lost``, ``unaccounted``,
``line_holes``, ``source_gaps``, ``conflicts``, ``quarantined``, ``skipped``,
``capacity``, ``burst_rate``, ``calm_rate``, ``achieved_rate`` and
``backpressure`` (the source's), the backlog -- messages due by the schedule
that the client did not have yet -- at its peak (``backlog_peak``, and when:
``backlog_peak_at_s`` from the start of the burst), ``catch_up_s`` (from the
end of the burst until the backlog was under half a second of the calm rate;
``null`` if it never was before the capture ended) and ``drained_s`` (until
the client had the last message), ``memory_mib`` (each process's peak RSS,
sampled every quarter second), ``killed_adapter``, ``promoted_adapter``,
``reference`` (``books_equal``, ``stats_equal``, the first symbols that differ)
and the client's ``books`` and ``stats``; ``passed`` and ``failed_checks``
(:func:`verdict`). It exits 1 on anything lost, unaccounted or conflicting,
or books or stats that differ from the reference.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any, Final, TypeVar

import psutil

from feedha.adapter.formats.capture_registry import capture_named, default_capture
from feedha.drills.accounting import GroupAccount, settle
from feedha.drills.group import (
    CHANNEL,
    Drill,
    DrillOptions,
    live_controls,
    place_local,
    sent_of,
    show_progress,
    start_drill,
    victim,
)
from feedha.drills.reference import compare, reference_books
from feedha.procs import ProcessError

__all__ = ["OverloadOptions", "backlog_figures", "capacity_of", "run_overload", "verdict"]

_T = TypeVar("_T")

SAMPLE_S: Final = 0.25
WARM_UP_S: Final = 2.0  # the capacity run's first seconds fill the queues: not counted
CAUGHT_UP_S: Final = 0.5  # caught up: a backlog under this much of the calm rate
DRAIN_STALL_S: Final = 15.0  # the client delivered nothing new for this long: what is missing is lost
DRAIN_MAX_S: Final = 600.0
TAIL_MAX_S: Final = 15.0  # the capacity run: how long the client may take to catch up after the source
GUARD_S: Final = 7200.0  # the source's --seconds: only a hung run ends there


@dataclass(frozen=True, slots=True, kw_only=True)
class OverloadOptions:
    """What ``feedha drill overload`` runs (see the module docstring)."""

    file: Path
    input_format: str = field(default_factory=lambda: default_capture("overload"))
    capacity: float | None = None
    burst_factor: float = 3.0
    burst_s: float = 10.0
    calm_factor: float = 0.5
    backups: int = 2
    depth: int = 10
    kill: str = "active"  # active | none
    kill_after_s: float = 5.0
    measure_s: float = 8.0
    reference: bool = True

    def __post_init__(self) -> None:
        checks = {
            "capacity": self.capacity is None or self.capacity > 0,
            "burst_factor": self.burst_factor > 0,
            "burst_s": self.burst_s > 0,
            "calm_factor": self.calm_factor > 0,
            "backups": self.backups >= 1,
            "depth": self.depth >= 1,
            "kill": self.kill in ("active", "none"),
            "kill_after_s": 0 <= self.kill_after_s < self.burst_s,
            "measure_s": self.measure_s > WARM_UP_S,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"bad --{name.replace('_', '-')}: {getattr(self, name)!r}")


@dataclass(slots=True)
class _Watch:
    """What the drill samples while the group runs."""

    started: float | None = None  # the drill's clock when the source's schedule began
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (t, due, client position)
    rss_mib: dict[str, float] = field(default_factory=dict)  # peak per process
    killed: int | None = None


def due_at(t: float, *, count: int, burst_rate: float, burst_s: float, calm_rate: float) -> int:
    """Messages the schedule has made due ``t`` seconds after it began (as ``--burst`` plays it)."""
    if t <= 0:
        return 0
    first = min(count, int(burst_rate * burst_s))
    if t < burst_s:
        return min(count, int(burst_rate * t) + 1)
    return min(count, first + int(calm_rate * (t - burst_s)) + 1)


def backlog_figures(
    samples: list[tuple[float, int, int]], *, burst_s: float, calm_rate: float
) -> dict[str, Any]:
    """The backlog's peak, and how long after the burst it took to catch up and to drain (pure).

    Args:
        samples: ``(t, due, position)``: seconds since the schedule began, messages due, the
            client's furthest source position delivered; the last is the run's end.
        burst_s: the burst's end (or the schedule's, when the capture was all due before it).
        calm_rate: the rate after it.
    """
    peak, peak_at, caught, drained = 0, 0.0, None, None
    threshold = max(1, int(calm_rate * CAUGHT_UP_S))
    final = samples[-1][2] if samples else 0  # where the client ended
    for t, due, position in samples:
        backlog = max(0, due - position)
        if backlog > peak:
            peak, peak_at = backlog, t
        if t >= burst_s and caught is None and peak and backlog <= threshold:
            caught = t - burst_s
        if drained is None and final and position >= final:
            drained = max(0.0, t - burst_s)
    return {
        "backlog_peak": peak,
        "backlog_peak_at_s": round(peak_at, 2),
        "catch_up_s": None if caught is None else round(caught, 2),
        "drained_s": None if drained is None else round(drained, 2),
    }


def _count(options: OverloadOptions) -> int:
    data = options.file.read_bytes()
    return len(capture_named(options.input_format).read(data).messages)


def _group_options(options: OverloadOptions, rate: float, source_args: list[str]) -> DrillOptions:
    return DrillOptions(
        backups=options.backups,
        rate=rate,
        seconds=GUARD_S,
        kill="none",
        extra_adapter_args=["--format", options.input_format, "--book-depth", str(options.depth)],
        extra_source_args=["--file", str(options.file), "--format", options.input_format, *source_args],
        extra_client_args=["--books", str(options.depth)],
    )


def _run_group(base: DrillOptions, log: IO[str], drive: Callable[[Drill], _T]) -> _T:
    """Start a group, run ``drive(drill)``, tear it all down."""
    placement = place_local(base)
    drill: Drill | None = None
    try:
        drill = start_drill(base, log, placement)
        return drive(drill)
    finally:
        if drill is not None:
            for proc in drill.all():
                proc.kill()
        if placement.journal_root is not None:
            shutil.rmtree(placement.journal_root, ignore_errors=True)


def measure_capacity(options: OverloadOptions, log: IO[str]) -> float:
    """The channel's capacity in capture messages a second: the client's pace on an unpaced capture."""
    base = _group_options(options, 1.0, ["--as-fast-as-possible", "--seconds", f"{options.measure_s:g}"])

    def drive(drill: Drill) -> float:
        assert drill.client is not None and drill.source is not None
        points: list[tuple[float, int]] = []
        ended: float | None = None  # when the source ended: the client takes what is on its way
        while ended is None or (time.monotonic() - ended < TAIL_MAX_S and not _still(points)):
            if ended is None and not drill.source.alive:
                ended = time.monotonic()
            progress = drill.client.last("progress") or {}
            points.append((time.monotonic(), int(progress.get("source_seq", 0))))
            show_progress(f"drill overload: measuring capacity, at {points[-1][1]:>9,}")
            time.sleep(SAMPLE_S)
        return capacity_of(points)

    return _run_group(base, log, drive)


def _still(points: list[tuple[float, int]]) -> bool:
    # The client's position has not moved for a second.
    recent = [position for t, position in points if t >= points[-1][0] - 1.0] if points else []
    return len(recent) >= 4 and recent[0] == recent[-1]


def capacity_of(points: list[tuple[float, int]]) -> float:
    """Messages a second from ``(time, client position)`` samples of an unpaced run (pure): from
    :data:`WARM_UP_S` after the first delivery (the queues filling) to the last move.

    Raises:
        ProcessError: fewer than two moves: nothing to measure (give ``--capacity``).
    """
    moving = [point for point in points if point[1] > 0]
    while len(moving) >= 2 and moving[-2][1] == moving[-1][1]:
        moving.pop()  # the tail after the last move
    if len(moving) < 2 or moving[-1][1] <= moving[0][1]:
        raise ProcessError(
            "the capacity run delivered too little to measure (a short capture, or a broken group: see "
            "the components' log); give --capacity"
        )
    begin = next((p for p in moving if p[0] - moving[0][0] >= WARM_UP_S and p is not moving[-1]), moving[0])
    end = moving[-1]
    return max(1.0, (end[1] - begin[1]) / max(end[0] - begin[0], 1e-3))


def run_overload(options: OverloadOptions, log: IO[str]) -> dict[str, Any]:
    """Run the drill (see the module docstring); returns its summary. Tears down what it built."""
    count = _count(options)
    capacity = options.capacity or measure_capacity(options, log)
    burst, calm = capacity * options.burst_factor, capacity * options.calm_factor
    source_args = ["--burst", f"{burst:.1f}:{options.burst_s:g}", "--progress"]
    base = _group_options(options, calm, source_args)
    rates = {"capacity": round(capacity, 1), "burst_rate": round(burst, 1), "calm_rate": round(calm, 1)}
    result = _run_group(base, log, partial(_drive, options=options, count=count, rates=rates))
    if options.reference:
        show_progress("drill overload: converting the capture alone, for the reference books")
        want = reference_books(options.input_format, options.file.read_bytes(), depth=options.depth)
        result["reference"] = compare(result, want)
    failed = verdict(result)
    result["passed"], result["failed_checks"] = not failed, failed
    show_progress("")
    return result


def verdict(result: dict[str, Any]) -> list[str]:
    """The checks a drill's summary fails (pure): nothing lost, unaccounted or conflicting, and
    books and stats equal to the reference (when it was computed)."""
    failed = [key for key in ("lost", "unaccounted", "conflicts") if result.get(key) != 0]
    reference = result.get("reference")
    if reference is not None:
        failed += [key for key in ("books_equal", "stats_equal") if not reference.get(key)]
    return failed


def _drive(drill: Drill, *, options: OverloadOptions, count: int, rates: dict[str, float]) -> dict[str, Any]:
    assert drill.source is not None and drill.client is not None
    watch = _Watch()
    schedule = partial(
        due_at,
        count=count,
        burst_rate=rates["burst_rate"],
        burst_s=options.burst_s,
        calm_rate=rates["calm_rate"],
    )
    while drill.source.alive:
        _sample(drill, watch, schedule, options)
        time.sleep(SAMPLE_S)
    source = drill.source.wait_for(lambda e: "sent" in e, 30)
    group = settle(partial(live_controls, drill), *sent_of(source))
    _drain(drill, watch, schedule, options, group.numbered)
    drill.client.stop()
    client = drill.client.wait_event("summary", 10)["channels"][CHANNEL]
    for proc in drill.adapters.values():
        if proc.alive:
            proc.stop()
    figures = backlog_figures(
        [(t - (watch.started or 0.0), due, position) for t, due, position in watch.samples],
        burst_s=min(options.burst_s, count / rates["burst_rate"]),  # a short capture is all due sooner
        calm_rate=rates["calm_rate"],
    )
    return _report(drill, watch, source, client, group, {**rates, **figures})


def _sample(drill: Drill, watch: _Watch, schedule: Callable[[float], int], options: OverloadOptions) -> None:
    # One look at the run: the schedule's start, the kill, the backlog, every process's memory.
    assert drill.source is not None and drill.client is not None
    now = time.monotonic()
    if watch.started is None:
        first = next((e for e in drill.source.events if e.get("event") == "progress"), None)
        if first is None:
            return
        watch.started = now - float(first["t"])
    t = now - watch.started
    if watch.killed is None and options.kill == "active" and t >= options.kill_after_s:
        watch.killed = victim(drill, "active")
        drill.adapters[watch.killed].kill()
    position = int((drill.client.last("progress") or {}).get("source_seq", 0))
    watch.samples.append((now, schedule(t), position))
    named = {f"adapter-{n}": p for n, p in drill.adapters.items()}
    for name, proc in {**named, "client": drill.client, "source": drill.source}.items():
        try:
            rss = psutil.Process(proc.popen.pid).memory_info().rss / 2**20
        except psutil.Error:
            continue  # gone (killed, or ended)
        watch.rss_mib[name] = max(watch.rss_mib.get(name, 0.0), rss)
    show_progress(f"drill overload: {t:6.1f}s  due {watch.samples[-1][1]:>9,}  client at {position:>9,}")


def _drain(
    drill: Drill, watch: _Watch, schedule: Callable[[float], int], options: OverloadOptions, numbered: int
) -> None:
    # Sample on until the client has every numbered message, or delivers nothing new for a while.
    assert drill.client is not None
    deadline, seen, moved = time.monotonic() + DRAIN_MAX_S, -1, time.monotonic()
    while time.monotonic() < deadline:
        _sample(drill, watch, schedule, options)
        delivered = int((drill.client.last("progress") or {}).get("delivered", 0))
        if delivered >= numbered:
            return
        if delivered != seen:
            seen, moved = delivered, time.monotonic()
        elif time.monotonic() - moved > DRAIN_STALL_S:
            return
        time.sleep(SAMPLE_S)


def _report(
    drill: Drill,
    watch: _Watch,
    source: dict[str, Any],
    client: dict[str, Any],
    group: GroupAccount,
    figures: dict[str, Any],
) -> dict[str, Any]:
    arbiter = client["arbiter"]
    promoted = [
        number
        for number, proc in drill.adapters.items()
        for event in proc.events
        if event.get("event") == "role" and event.get("new") == "active" and number != 1
    ]
    return {
        "sent": group.sent,
        "delivered": int(client["delivered"]),
        "lost": max(0, group.numbered - int(client["unique"])),
        "unaccounted": group.unaccounted,
        "line_holes": int(arbiter.get("line_holes", 0)),
        "source_gaps": group.in_gaps,
        "conflicts": int(arbiter.get("conflicts", 0)),
        "quarantined": group.quarantined,
        "skipped": group.skipped,
        **figures,
        "achieved_rate": float(source.get("achieved_rate", 0.0)),
        "backpressure": source.get("backpressure", {}),
        "memory_mib": {name: round(rss, 1) for name, rss in sorted(watch.rss_mib.items())},
        "killed_adapter": watch.killed,
        "promoted_adapter": promoted[-1] if promoted else None,
        "accounting": group.summary()["accounting"],
        "books": client.get("books", {}),
        "stats": client.get("stats", {}),
    }
