"""Checkpoint-side batch state and the foreachBatch handler of ``feedha feed``.

Theory of operation
-------------------
Spark's checkpoint replays a failed micro-batch with the same batch id and the
same input rows. :class:`BatchState` keeps, in ``<checkpoint>/feedha/``, what
the transforms need besides the rows so the replay is byte-identical:

* ``model.json``: the parameters the numbering depends on (seed, symbols,
  streams, rows per batch, source). A restart with different values is refused.
* ``batches.json``: event-time *epochs* ``[first_batch, anchor_ns]`` and the
  highest batch id ever started (synthetic), or each recent batch's last
  ``source_seq`` per stream (replay). It is written before a batch publishes.

A new epoch starts only at a batch that was never started before, so
replayed batches keep their old event times, and the event clock re-anchors
to the wall clock after downtime instead of backfilling it.

The event clock never runs ahead of the wall clock: a tick is published only
once its event time has come. Spark's triggers fall on the interval grid,
but the handler enters a batch a little after its trigger and a slow batch
makes the next trigger fire at once, so a batch's interval (the one after its
predecessor's) may not have ended when the handler enters it. Such a batch
waits until its newest tick is due (:meth:`FeedRun._publish`); one that is
more than a whole interval behind re-anchors instead. So the clock stays
within one interval of the wall clock, and a batch's event -> publish latency
is never below zero. (It used to: the clock was re-anchored only when two
intervals behind and never held back when ahead, and a run whose first batch
entered just after a grid point published every later batch one interval
early, -99.2 ms at p50 with a 200 ms trigger; another run, one interval late,
read +280 ms.) With ``--unpaced`` batches follow each other faster than their
intervals: the event clock is a numbering there, nothing waits, and no
latency is recorded.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from feedha.spark_feed import model
from feedha.spark_feed.config import FeedConfig
from feedha.spark_feed.market import PRICE_MODEL_VERSION
from feedha.spark_feed.sink import FrameTransport, Publisher, ZmqTransport, secure_source

logger = logging.getLogger(__name__)

KEEP_REPLAY_BATCHES: Final = 16
LATENCY_SAMPLES: Final = 100_000
# The event clock re-anchors when it falls more than this many trigger intervals behind.
MAX_LAG_INTERVALS: Final = 1
_WAIT_SLICE_S: Final = 0.05  # the longest sleep while a batch waits for its newest tick's time


class StopRequested(RuntimeError):
    """Raised in foreachBatch after a stop was asked for, so Spark does not commit the batch."""


def _write_json(path: Path, value: object) -> None:
    # Write-then-rename so a kill -9 leaves the old file or the new one, never half.
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


class BatchState:
    """The checkpoint-side facts that make a replayed batch byte-identical (see module doc).

    Args:
        directory: ``<checkpoint>/feedha`` (a local path).
        identity: the numbering parameters; must match what the directory holds.
        interval_ns: the trigger interval, the event-time span of one batch.

    Raises:
        ValueError: the checkpoint was made with other numbering parameters.
    """

    def __init__(self, directory: Path, identity: dict[str, object], interval_ns: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._path = directory / "batches.json"
        model_path = directory / "model.json"
        if model_path.exists():
            stored = json.loads(model_path.read_text())
            changed = {k: (stored.get(k), v) for k, v in identity.items() if stored.get(k) != v}
            if changed:
                raise ValueError(f"checkpoint was made with other parameters (stored, given): {changed}")
        else:
            _write_json(model_path, identity)
        state = json.loads(self._path.read_text()) if self._path.exists() else {}
        self.epochs: list[list[int]] = state.get("epochs", [])
        self.max_batch: int = state.get("max_batch", -1)
        self.ends: dict[str, dict[str, int]] = state.get("ends", {})
        self._interval_ns = interval_ns

    def event_base_ns(self, batch_id: int, now_ns: int) -> int:
        """Event time of the first row of a synthetic batch (persisted before it is used).

        A batch never started before opens a new epoch when the event clock is
        more than :data:`MAX_LAG_INTERVALS` intervals behind the wall clock (at
        the first batch of a run, after downtime, when the job cannot keep up,
        or when a slow batch made Spark skip a trigger): the clock jumps ahead
        to the interval that ended last on the trigger grid instead of piling
        up lag, so ticks are never backfilled. A batch started before keeps its
        event times. The clock can be ahead (the batch's interval has not ended
        at ``now_ns``); the caller then waits (:meth:`newest_event_ns`).
        """
        interval = self._interval_ns
        if batch_id > self.max_batch:
            if self.epochs:
                first, anchor = self._epoch_of(batch_id)
                behind = now_ns - (anchor + (batch_id - first + 1) * interval)
            if not self.epochs or behind > MAX_LAG_INTERVALS * interval:
                # Align to the trigger grid so the batch's rows lie in the interval just past.
                self.epochs.append([batch_id, now_ns // interval * interval - interval])
            self.max_batch = batch_id
            self._save()
        first, anchor = self._epoch_of(batch_id)
        return anchor + (batch_id - first) * interval

    def newest_event_ns(self, base_ns: int, rows_per_batch: int) -> int:
        """The latest event time a batch based at ``base_ns`` can hold (its last row's).

        Rows spread over one interval from the base (row ``i`` of ``R`` at
        ``base + i * interval // R``), so the last is ``base + (R - 1) * interval // R``.
        """
        return base_ns + (rows_per_batch - 1) * self._interval_ns // rows_per_batch

    def _epoch_of(self, batch_id: int) -> tuple[int, int]:
        first, anchor = max((e for e in self.epochs if e[0] <= batch_id), key=lambda e: e[0])
        return first, anchor

    def replay_bases(self, batch_id: int) -> dict[int, int]:
        """Per stream number, the last ``source_seq`` assigned before ``batch_id``."""
        earlier = [int(b) for b in self.ends if int(b) < batch_id]
        return {int(k): v for k, v in self.ends[str(max(earlier))].items()} if earlier else {}

    def record_replay(self, batch_id: int, last_seq: dict[int, int]) -> None:
        """Persist a replay batch's per-stream last ``source_seq`` (before publishing it)."""
        self.ends[str(batch_id)] = {str(k): v for k, v in last_seq.items()}
        for old in sorted(self.ends, key=int)[:-KEEP_REPLAY_BATCHES]:
            del self.ends[old]
        self._save()

    def _save(self) -> None:
        _write_json(self._path, {"epochs": self.epochs, "max_batch": self.max_batch, "ends": self.ends})

    def __repr__(self) -> str:
        return (
            f"<BatchState [epochs={len(self.epochs)}, max_batch={self.max_batch}, replay={len(self.ends)}]>"
        )


@dataclass(slots=True)
class RunStats:
    """Per-batch latency samples of this run (at most :data:`LATENCY_SAMPLES` of each)."""

    latency_ms: list[float] = field(default_factory=list)
    lag_ms: list[float] = field(default_factory=list)
    handler_ms: list[float] = field(default_factory=list)
    collect_ms: list[float] = field(default_factory=list)
    last_latency_ms: float = 0.0
    last_lag_ms: float = 0.0

    def add(
        self, latency_ms: float | None, lag_ms: float | None, handler_ms: float, collect_ms: float
    ) -> None:
        """Record one published batch.

        Args:
            latency_ms: event -> publish of its newest tick (None: not a clock, e.g. unpaced).
            lag_ms: event -> publish of its oldest tick (None likewise).
            handler_ms: the whole handler.
            collect_ms: the part of ``handler_ms`` spent in Spark.
        """
        if len(self.handler_ms) < LATENCY_SAMPLES:
            self.handler_ms.append(handler_ms)
            self.collect_ms.append(collect_ms)
            if latency_ms is not None and lag_ms is not None:
                self.latency_ms.append(latency_ms)
                self.lag_ms.append(lag_ms)
        if latency_ms is not None and lag_ms is not None:
            self.last_latency_ms, self.last_lag_ms = latency_ms, lag_ms


def percentiles(samples: list[float]) -> dict[str, float]:
    """``p50/p90/p99/max/mean`` of samples, rounded to 0.1 ms."""
    if not samples:
        return {}
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99), "max": round(ordered[-1], 1),
            "mean": round(statistics.fmean(ordered), 1), "count": len(ordered)}  # fmt: skip


class FeedRun:
    """One run of the job: sockets, publisher, checkpoint state, and the foreachBatch handler.

    Args:
        config: the job's settings.
        spark: the SparkSession.
        clock: the wall clock, ns since the epoch (tests pass their own).
        sleep: how to wait, seconds (tests pass their own).
    """

    def __init__(
        self,
        config: FeedConfig,
        spark: Any,
        *,
        clock: Callable[[], int] = time.time_ns,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.stats = RunStats()
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._in_batch = False
        self._stopping = False
        self._started_at = time.monotonic()
        self._spark = spark
        identity = self._make_source()
        self.state = BatchState(Path(config.checkpoint) / "feedha", identity, config.trigger_ms * 1_000_000)
        self._open_streams()

    def _make_source(self) -> dict[str, object]:
        # The run's identity, which its checkpoint keeps (a restart with other parameters is
        # refused); a synthetic source's schedule and the batches it makes ahead.
        from feedha.spark_feed.ahead import Ahead
        from feedha.spark_feed.synthetic import SyntheticBatches

        config = self.config
        identity: dict[str, object] = {
            "source": config.source,
            "streams": [asdict(s) for s in config.streams],
        }
        if config.source == "synthetic":
            identity |= {
                "seed": config.seed,
                "symbols": config.symbols,
                "rows_per_batch": config.rows_per_batch,
                "price_model": PRICE_MODEL_VERSION,
            }
            symbols = model.make_symbols(config.symbols, config.seed, config.streams)
            self.schedule = model.build_schedule(symbols, config.streams, config.seed)
            synthetic = SyntheticBatches(
                self.schedule,
                seed=config.seed,
                sender=config.sender,
                rows_per_batch=config.rows_per_batch,
                interval_ns=config.trigger_ms * 1_000_000,
            )
            self._ahead = Ahead(synthetic, config.rows_per_batch)
        return identity

    def _open_streams(self) -> None:
        # A socket a stream (XPUB when it waits for subscribers; CURVE with a key), and the publisher.
        import zmq

        config = self.config
        self._context = zmq.Context()
        xpub = config.wait_subscribers > 0
        self._curve = (
            secure_source(self._context, config.curve_key, config.allowed_keys) if config.curve_key else None
        )
        self._transports = {
            s.number: ZmqTransport(
                self._context,
                config.endpoint_of(s),
                sndhwm=config.sndhwm,
                xpub=xpub,
                curve=self._curve,
                max_stall_s=config.max_stall_s,
            )
            for s in config.streams
        }
        transports: dict[int, FrameTransport] = dict(self._transports)
        self.publisher = Publisher(
            config.streams, transports, frame_messages=config.frame_messages, max_rate=config.max_rate
        )

    def wait_subscribers(self, stop: threading.Event) -> bool:
        """With ``--wait-subscribers N``, wait until every stream's XPUB has N subscribers."""
        deadline = time.monotonic() + self.config.wait_timeout_s
        for transport in self._transports.values():
            while transport.poll_subscriptions(100) < self.config.wait_subscribers:
                if stop.is_set() or time.monotonic() > deadline:
                    logger.error("gave up waiting for subscribers on %s", transport.endpoint)
                    return False
        return True

    def mark_started(self) -> None:
        """Start the clock of the rows/s figure."""
        self._started_at = time.monotonic()

    def on_batch(self, batch: Any, batch_id: int) -> None:
        """foreachBatch: build, collect and publish one micro-batch."""
        with self._lock:
            if self._stopping:
                raise StopRequested(f"stopping; batch {batch_id} left for the next run")
            self._in_batch = True
        try:
            self._publish(batch, batch_id)
        finally:
            with self._lock:
                self._in_batch = False

    def _publish(self, batch: Any, batch_id: int) -> None:
        from feedha.spark_feed import transforms

        entered_ns = self._clock()
        config = self.config
        # Event -> publish is a latency only where event times are a clock: the paced synthetic
        # market (replayed files carry their own times; unpaced batches outrun theirs).
        timed = config.source == "synthetic" and not config.unpaced
        if config.source == "synthetic":
            base_ns = self.state.event_base_ns(batch_id, entered_ns)
            _values, chunks = self._ahead.chunks(batch_id, base_ns, lambda: row_numbers(batch))
            collected_ns = self._clock()
            if timed:
                self._wait_until(self.state.newest_event_ns(base_ns, config.rows_per_batch))
            report = self.publisher.publish_batch(chunks)
        else:
            bases = self.state.replay_bases(batch_id)
            ordered = transforms.with_row_order(batch)
            out = transforms.replay_messages(ordered, config.streams, bases, sender=config.sender)
            table = out.toArrow()
            collected_ns = self._clock()
            self.state.record_replay(batch_id, _last_seqs(table, bases))
            report = self.publisher.publish_table(table)
        done_ns = self._clock()
        if report.rows:
            self.stats.add(
                latency_ms=(done_ns - report.newest_event_ns) / 1e6 if timed else None,
                lag_ms=(done_ns - report.oldest_event_ns) / 1e6 if timed else None,
                handler_ms=(done_ns - entered_ns) / 1e6,
                collect_ms=(collected_ns - entered_ns) / 1e6,
            )

    def _wait_until(self, due_ns: int) -> None:
        # A tick is published once its event time has come, never before: the
        # batch's interval may not have ended when Spark hands it over (see the
        # module doc). At most one interval, in slices.
        while (left_ns := due_ns - self._clock()) > 0:
            self._sleep(min(left_ns / 1e9, _WAIT_SLICE_S))

    def request_stop(self) -> None:
        """Refuse further batches (they raise :class:`StopRequested` and are not committed)."""
        with self._lock:
            self._stopping = True

    def is_stopping(self) -> bool:
        """Whether a stop was requested."""
        with self._lock:
            return self._stopping

    def is_in_batch(self) -> bool:
        """Whether a batch is being built or published right now."""
        with self._lock:
            return self._in_batch

    def close(self) -> None:
        """Close the sockets (each lingers to flush) and the context."""
        if self.config.source == "synthetic":
            self._ahead.close()
        for transport in self._transports.values():
            transport.close()
        if self._curve is not None:
            self._curve[1].stop()  # the ZAP thread holds a socket of the context
        self._context.term()

    def _backpressure(self) -> dict[str, float | int]:
        # The streams' waits for slow adapters (feedha.transport.backpressure), summed.
        senders = [transport.sender for transport in self._transports.values()]
        return {
            "blocked_s": round(sum(sender.blocked_s for sender in senders), 3),
            "longest_block_s": round(max((sender.longest_block_s for sender in senders), default=0.0), 3),
            "blocked_sends": sum(sender.blocked_sends for sender in senders),
            "stalls": sum(sender.stalls for sender in senders),
        }

    def summary(self, *, elapsed_s: float) -> dict[str, object]:
        """The JSON summary line printed at exit."""
        names = {s.number: s.name for s in self.config.streams}
        counters = self.publisher.counters
        sent = self.publisher.counters_total()
        running = max(time.monotonic() - self._started_at, 1e-9)
        return {
            "sent": sent,
            "streams": {
                names[n]: {"number": n, "last_seq": c.last_seq, "sent": c.sent, "replayed": c.replayed}
                for n, c in counters.items()
            },  # fmt: skip
            "batches": self.publisher.batches,
            "dropped": self.publisher.dropped,
            "elapsed_s": round(elapsed_s, 3),
            "rows_per_s": round(sent / running, 1),
            "achieved_rate": round(sent / running, 1),
            "backpressure": self._backpressure(),
            "batch_latency_ms": percentiles(self.stats.latency_ms),
            "batch_lag_ms": percentiles(self.stats.lag_ms),
            "handler_ms": percentiles(self.stats.handler_ms),
            "collect_ms": percentiles(self.stats.collect_ms),
            "encoded_ahead": self._ahead.counts() if self.config.source == "synthetic" else None,
            "source": self.config.source,
        }


def row_numbers(batch: Any) -> Any:
    """The ``value`` column of a ``rate-micro-batch`` micro-batch, collected as one ascending int64 array.

    Executors scan the source; only the row numbers (8 bytes a row) cross to
    the driver, where the messages are made.
    """
    import numpy as np

    column = batch.select("value").toArrow().column("value")
    values = np.asarray(column.to_numpy(), dtype=np.int64)
    if len(values) > 1 and not bool(np.all(values[1:] > values[:-1])):
        values = np.sort(values)  # partitions arrive in order today; never rely on it
    return values


def _last_seqs(table: Any, bases: dict[int, int]) -> dict[int, int]:
    # Per stream, the last source_seq once this batch is out (the base if the batch has none).
    from feedha.spark_feed.schema import COL_SEQ, COL_STREAM

    result = dict(bases)
    if table.num_rows:
        grouped = table.group_by(COL_STREAM).aggregate([(COL_SEQ, "max")])
        for number, last in zip(
            grouped[COL_STREAM].to_pylist(), grouped[f"{COL_SEQ}_max"].to_pylist(), strict=True
        ):
            if number:
                result[number] = max(result.get(number, 0), last)
    return result
