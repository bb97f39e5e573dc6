"""Progress of ``feedha bench``: which benchmark runs, and how far the whole run is.

On a terminal a bar is redrawn in place on stderr twice a second::

    feedha bench [3/9] latency  [#########...............]  38%  1:12 of ~3:10

The share is by time: each benchmark counts for its expected duration
(what it took last time, kept in ``RESULTS/.durations.json``, or a default),
and a benchmark that runs longer than expected holds at 99 % of its share
until it ends. On anything else (a pipe, a CI log) one line per benchmark
start and end goes to stderr instead; with ``--json`` nothing extra at all.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, TextIO

DEFAULT_S: Final = {True: 20.0, False: 90.0}  # expected seconds per benchmark, quick or full
REDRAW_S: Final = 0.5
BAR_WIDTH: Final = 24


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}:{rest:02d}"


def render(
    name: str, index: int, total: int, *, done_s: float, elapsed_s: float, expected_s: float, whole_s: float
) -> str:
    """One line of the bar.

    Args:
        name: the running benchmark.
        index: its number, from 1.
        total: how many run.
        done_s: the expected seconds of the benchmarks already finished.
        elapsed_s: seconds since the run started.
        expected_s: the running benchmark's expected seconds.
        whole_s: the expected seconds of the whole run.
    """
    current = min(max(0.0, elapsed_s - done_s), 0.99 * expected_s)
    share = 0.0 if whole_s <= 0 else min(1.0, (done_s + current) / whole_s)
    filled = round(share * BAR_WIDTH)
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    eta = max(whole_s, elapsed_s)
    times = f"{_clock(elapsed_s)} of ~{_clock(eta)}"
    return f"feedha bench [{index}/{total}] {name:<10} [{bar}] {share:4.0%}  {times}"


class Progress:
    """Shows the run's progress on ``stream`` (see the module docstring).

    Args:
        names: the benchmarks, in order.
        stream: where to write (stderr).
        enabled: ``False`` with ``--json``: write nothing.
        quick: the run is ``--quick`` (default estimates differ).
        memory: the file of past durations (read now, written by :meth:`close`).
    """

    def __init__(
        self, names: Sequence[str], *, stream: TextIO, enabled: bool, quick: bool, memory: Path | None
    ) -> None:
        self._names = list(names)
        self._stream = stream
        self._enabled = enabled
        self._tty = enabled and stream.isatty()
        self._quick = quick
        self._memory = memory
        self._past = _read(memory).get("quick" if quick else "full", {})
        self._expected = [float(self._past.get(n, DEFAULT_S[quick])) for n in self._names]
        self._took: dict[str, float] = {}
        self._started = time.monotonic()
        self._index = -1
        self._done_s = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"<Progress [{self._index + 1}/{len(self._names)}, tty={self._tty}]>"

    def start(self, name: str) -> None:
        """``name`` begins."""
        with self._lock:
            self._index = self._names.index(name)
            self._begun = time.monotonic()
        if not self._enabled:
            return
        if not self._tty:
            print(
                f"feedha bench: [{self._index + 1}/{len(self._names)}] {name} ...",
                file=self._stream,
                flush=True,
            )
            return
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="bench-progress", daemon=True)
            self._ticker.start()
        self._draw()

    def finish(self, name: str, *, ok: bool) -> None:
        """``name`` ended (``ok``: without crashing)."""
        with self._lock:
            took = time.monotonic() - self._begun
            if ok:
                self._took[name] = took
            self._done_s += self._expected[self._index]
        if self._enabled and not self._tty:
            state = "done" if ok else "crashed"
            print(f"feedha bench: {name} {state} in {took:.0f} s", file=self._stream, flush=True)

    def close(self) -> None:
        """Stop drawing, clear the bar, remember the durations."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2)
            print("\r\x1b[K", end="", file=self._stream, flush=True)
        if self._memory is not None and self._took:
            memory = _read(self._memory)
            memory.setdefault("quick" if self._quick else "full", {}).update(self._took)
            try:
                self._memory.parent.mkdir(parents=True, exist_ok=True)
                self._memory.write_text(json.dumps(memory, indent=1, sort_keys=True))
            except OSError:
                pass  # estimates only: a read-only results folder costs nothing

    def _tick(self) -> None:
        while not self._stop.wait(REDRAW_S):
            self._draw()

    def _draw(self) -> None:
        with self._lock:
            if self._index < 0 or self._stop.is_set():
                return
            line = render(
                self._names[self._index],
                self._index + 1,
                len(self._names),
                done_s=self._done_s,
                elapsed_s=time.monotonic() - self._started,
                expected_s=self._expected[self._index],
                whole_s=sum(self._expected),
            )
        print(f"\r\x1b[K{line}", end="", file=self._stream, flush=True)

    def clear_line(self) -> None:
        """Clear the bar before other output (a figure) is printed to the same terminal."""
        if self._tty:
            print("\r\x1b[K", end="", file=self._stream, flush=True)


def _read(path: Path | None) -> dict[str, dict[str, float]]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, Mapping):
        return {}
    return {
        str(mode): {str(k): float(v) for k, v in table.items() if isinstance(v, int | float) and v > 0}
        for mode, table in data.items()
        if isinstance(table, Mapping)
    }
