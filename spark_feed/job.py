"""``feedha feed``: the PySpark Structured Streaming feed source.

Theory of operation
-------------------
``readStream`` (the ``rate-micro-batch`` source for the synthetic market, or a
directory of tick files for replay) -> ``foreachBatch`` on the driver ->
:mod:`spark_feed.transforms` builds the FIX messages -> ``toArrow()`` ->
:class:`spark_feed.sink.Publisher` sends them on one ZeroMQ PUB per source
stream. Spark's checkpoint holds the source offsets; the few facts Spark does
not keep (the model parameters, each batch's event-time anchor, the replay
source's per-stream sequence numbers) go in ``<checkpoint>/feedha/`` *before*
a batch is published, so a batch replayed after a crash is rebuilt
byte-for-byte (see :class:`BatchState`).

``rate-micro-batch`` gives exactly ``rows_per_batch`` rows per trigger and,
unlike the ``rate`` source, never backfills the time the job was down; the
trigger interval therefore paces the source.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Final

from feedha import logs
from feedha.spark_feed import standalone, submit
from feedha.spark_feed._run import BatchState, FeedRun, StopRequested
from feedha.spark_feed.config import FeedConfig, parse_args

logger = logging.getLogger(__name__)

PROGRESS_EVERY_S: Final = 2.0
STOP_WAIT_S: Final = 30.0

__all__ = ["BatchState", "FeedConfig", "StopRequested", "main", "parse_args", "build_session"]


def build_session(config: FeedConfig) -> Any:
    """Start (or get) the SparkSession: quiet logs, no UI, UTC, Arrow on."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.appName("feedha-feed")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(config.partitions))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.files.maxPartitionBytes", str(1 << 30))
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "false")
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=warn")
    )
    if config.master:
        builder = builder.master(config.master)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(config.spark_log_level)
    return spark


def start_query(spark: Any, run: FeedRun) -> Any:
    """readStream -> foreachBatch(run.on_batch) -> writeStream, started."""
    config = run.config
    if config.source == "synthetic":
        stream = (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", config.rows_per_batch)
            .option("numPartitions", config.partitions)
            .load()
        )
    else:
        from feedha.spark_feed.schema import REPLAY_SCHEMA

        reader = spark.readStream.schema(REPLAY_SCHEMA).option("maxFilesPerTrigger", config.files_per_trigger)
        if config.replay_format == "csv":
            reader = reader.option("header", "true")
        stream = reader.format(config.replay_format).load(config.replay_dir)
        stream = stream.select("*", stream["_metadata.file_path"].alias("file"))
    writer = (
        stream.writeStream.foreachBatch(run.on_batch)
        .option("checkpointLocation", config.checkpoint)
        .queryName("feedha-feed")
    )
    interval = "0 seconds" if config.unpaced else f"{config.trigger_ms} milliseconds"
    return writer.trigger(processingTime=interval).start()


@dataclass(slots=True)
class _Progress:
    last_at: float
    last_sent: int = 0


def _report_progress(run: FeedRun, progress: _Progress, now: float) -> None:
    sent = run.publisher.counters_total()
    rate = (sent - progress.last_sent) / max(now - progress.last_at, 1e-9)
    stats = run.stats
    print(
        f"feed: {sent} sent, {rate:,.0f} rows/s, {run.publisher.batches} batches, "
        f"last batch {stats.last_latency_ms:.0f} ms event->publish, lag {stats.last_lag_ms:.0f} ms",
        file=sys.stderr,
        flush=True,
    )
    progress.last_at, progress.last_sent = now, sent


def _wait_stopped(run: FeedRun, query: Any, stop: threading.Event, deadline: float | None) -> None:
    progress = _Progress(last_at=time.monotonic())
    while query.isActive and not stop.is_set():
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            break
        if not run.config.quiet and now - progress.last_at >= PROGRESS_EVERY_S:
            _report_progress(run, progress, now)
        stop.wait(0.2)


def _stop_query(run: FeedRun, query: Any) -> None:
    # Strategy: refuse new batches first, let the one in flight finish
    # publishing, then stop Spark while it is idle between triggers.
    run.request_stop()
    deadline = time.monotonic() + STOP_WAIT_S
    while run.is_in_batch() and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()


def main(argv: list[str]) -> int:
    """Run the feed source until ``--seconds`` pass or SIGTERM/SIGINT.

    Args:
        argv: command-line arguments (see ``--help``).

    Returns:
        0 on a clean stop, 1 if the query failed, 2 on bad arguments.
    """
    try:
        config = parse_args(argv)
    except ValueError as exc:
        print(f"feedha feed: {exc}", file=sys.stderr)
        return 2
    logs.configure("WARNING" if config.quiet else config.log_level, config.log_format)
    if config.master == standalone.LOCAL_CLUSTER:
        return submit.run_on_local_cluster(argv, standalone.ClusterConfig(workers=config.local_workers))
    if os.environ.get(submit.DIE_WITH_PARENT):
        standalone.die_with_parent()  # a driver under spark-submit's JVM must not outlive it
    logging.getLogger("py4j").setLevel(logging.WARNING)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda _s, _f: stop.set())
    if (config.master or "").startswith("local"):
        # Keeps log4j's "hostname resolves to a loopback address" notice off stdout.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    started = time.monotonic()
    spark = build_session(config)
    try:
        run = FeedRun(config, spark)
    except ValueError as exc:  # e.g. the checkpoint was made with other parameters
        print(f"feedha feed: {exc}", file=sys.stderr)
        spark.stop()
        return 2
    failed = False
    try:
        if not run.wait_subscribers(stop):
            return 1
        query = start_query(spark, run)
        run.mark_started()
        deadline = None if config.seconds is None else time.monotonic() + config.seconds
        _wait_stopped(run, query, stop, deadline)
        error = query.exception()
        if error is not None and not run.is_stopping():
            logger.error("streaming query failed: %s", error)
            failed = True
        if query.isActive:
            _stop_query(run, query)
    finally:
        run.close()
        summary = run.summary(elapsed_s=time.monotonic() - started)
        print(json.dumps(summary), flush=True)
        spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
