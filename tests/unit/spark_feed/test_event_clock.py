"""The Spark feed's event clock: a tick is never published before its event time (no JVM).

``bench spark_feed`` once read the event -> publish latency of a batch's newest
tick as -99.2 ms at p50: after a first batch entered just past a trigger
point, every later batch's interval had not ended yet when it was published.
These tests drive :class:`FeedRun`'s handler with a simulated wall clock and
a stand-in micro-batch (only the row numbers Spark would hand over).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pytest

from feedha.spark_feed._run import BatchState, FeedRun
from feedha.spark_feed.config import FeedConfig

pytestmark = pytest.mark.timeout(60)

INTERVAL_NS = 200_000_000
GRID_NS = 1_800_000_000_000_000_000  # a trigger point (a multiple of the interval)
RATE = 2_000  # rows/s: 400 rows per 200 ms batch


class Clock:
    """A wall clock that moves only when slept on or set."""

    def __init__(self, now_ns: int) -> None:
        self.now_ns = now_ns
        self.slept_s = 0.0

    def __call__(self) -> int:
        return self.now_ns

    def sleep(self, seconds: float) -> None:
        assert 0 < seconds <= 0.05
        self.slept_s += seconds
        self.now_ns += max(1, int(seconds * 1e9))


class Batch:
    """What ``row_numbers`` reads of a rate-micro-batch micro-batch: the ``value`` column."""

    def __init__(self, batch_id: int, rows: int) -> None:
        self._values = np.arange(batch_id * rows, (batch_id + 1) * rows, dtype=np.int64)

    def select(self, _name: str) -> Batch:
        return self

    def toArrow(self) -> pa.Table:  # noqa: N802 - Spark's name
        return pa.table({"value": self._values})


@pytest.fixture
def run_and_clock(tmp_path: Path) -> Iterator[tuple[FeedRun, Clock]]:
    config = FeedConfig(
        rate=RATE,
        trigger_ms=INTERVAL_NS // 1_000_000,
        checkpoint=str(tmp_path / "ckpt"),
        endpoints=(("A-M", "tcp://127.0.0.1:*"), ("N-Z", "tcp://127.0.0.1:*")),
    )
    clock = Clock(GRID_NS)
    run = FeedRun(config, spark=None, clock=clock, sleep=clock.sleep)
    try:
        yield run, clock
    finally:
        run.close()


def test_a_batch_whose_interval_has_not_ended_waits_for_its_newest_tick(
    run_and_clock: tuple[FeedRun, Clock],
) -> None:
    run, clock = run_and_clock
    rows = run.config.rows_per_batch
    # Batch 0 enters 10 ms past a trigger point: its rows are the interval just ended.
    clock.now_ns = GRID_NS + 10_000_000
    run.on_batch(Batch(0, rows), 0)
    assert clock.slept_s == 0
    # Spark fired batch 1 from a trigger time before that point: the handler enters
    # 30 ms past it, while batch 1's interval (the next one) runs for 170 ms more.
    clock.now_ns = GRID_NS + 30_000_000
    run.on_batch(Batch(1, rows), 1)
    newest = GRID_NS + (rows - 1) * INTERVAL_NS // rows
    assert clock.now_ns >= newest  # published after its newest tick (the old code: 169 ms before it)
    assert 0.16 < clock.slept_s < 0.18
    assert len(run.stats.latency_ms) == 2 and min(run.stats.latency_ms) >= 0
    assert min(run.stats.lag_ms) >= max(run.stats.latency_ms[1:])  # the oldest tick waited longest
    assert run.summary(elapsed_s=1.0)["batch_latency_ms"]["count"] == 2


def test_an_unpaced_run_waits_for_nothing_and_records_no_latency(tmp_path: Path) -> None:
    config = FeedConfig(rate=RATE, trigger_ms=200, unpaced=True, checkpoint=str(tmp_path / "ckpt"),
                        endpoints=(("A-M", "tcp://127.0.0.1:*"), ("N-Z", "tcp://127.0.0.1:*")))  # fmt: skip
    clock = Clock(GRID_NS + 10_000_000)
    run = FeedRun(config, spark=None, clock=clock, sleep=clock.sleep)
    try:
        for batch_id in range(5):  # back to back: the event clock runs ahead of the wall clock
            run.on_batch(Batch(batch_id, config.rows_per_batch), batch_id)
        assert clock.slept_s == 0
        assert run.stats.latency_ms == [] and len(run.stats.handler_ms) == 5
        assert run.summary(elapsed_s=1.0)["batch_latency_ms"] == {}
    finally:
        run.close()


@pytest.mark.parametrize("seed", range(5))
def test_the_event_clock_stays_within_one_interval_and_never_overlaps(tmp_path: Path, seed: int) -> None:
    # Handler entries as Spark makes them: a little after each trigger point,
    # sometimes a whole interval or more late (a slow batch, a stall).
    rng = random.Random(seed)
    state = BatchState(tmp_path / "feedha", {"seed": seed}, INTERVAL_NS)
    now, previous_end = GRID_NS + rng.randrange(INTERVAL_NS), 0
    for batch_id in range(200):
        base = state.event_base_ns(batch_id, now)
        end = base + INTERVAL_NS
        assert base >= previous_end  # event times never go back
        assert now - end <= INTERVAL_NS  # never more than one interval behind
        now = max(now, state.newest_event_ns(base, 400))  # ahead: the handler waits (FeedRun._wait_until)
        previous_end = end
        now += rng.choice((1, 20, 60, 150)) * 1_000_000 + rng.choice((0, 0, 0, INTERVAL_NS, 3 * INTERVAL_NS))
    # A batch started before keeps its event times (a replay after a crash).
    again = BatchState(tmp_path / "feedha", {"seed": seed}, INTERVAL_NS)
    assert again.event_base_ns(150, now + 10 * INTERVAL_NS) == state.event_base_ns(150, now)
