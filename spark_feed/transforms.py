"""DataFrame -> DataFrame transforms of the feed source (no reading, no writing).

Theory of operation
-------------------
Both sources end in the same output rows (``schema.OUTPUT_COLUMNS``): the
source-stream number, the gap-free ``source_seq``, the event time and the FIX
message built entirely in Spark SQL up to, but not including, its ``10=``
checksum trailer. The checksum is a byte sum that Spark SQL has no cheap
function for, so the driver-side sink adds it with numpy over the Arrow buffers
(see :func:`spark_feed.sink.finish_messages`).

* Synthetic: :class:`SyntheticEncoder` (like :func:`locate_rows`) maps the rate source's row number ``value``
  to (stream, source_seq, symbol, per-symbol tick index) in closed form through
  a broadcast join with the schedule table (the proof is in
  :mod:`spark_feed.model`); :class:`SyntheticEncoder` derives prices from a
  seeded hash of (symbol, tick), so a replayed batch yields identical bytes.
* Replay: :func:`replay_messages` numbers a micro-batch's rows per stream in
  file order (file path, then row position) starting after the per-stream
  ``source_seq`` the previous batch ended on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from feedha.spark_feed.model import Schedule, StreamSpec
from feedha.spark_feed.schema import COL_EVENT_NS, COL_MESSAGE, COL_SEQ, COL_STREAM, SCHEDULE_SCHEMA

SOH: Final = "\x01"
NS_PER_S: Final = 1_000_000_000
# Octaves of the hash-noise random walk: 2**(OCTAVES-1) ticks is the longest wave.
OCTAVES: Final = 10
TRADE_PERCENT: Final = 30


def schedule_frame(spark: SparkSession, schedule: Schedule) -> DataFrame:
    """The schedule as a small static DataFrame, one row per cycle position."""
    rows = [
        (
            position,
            schedule.symbols[symbol],
            symbol,
            schedule.symbol_stream[symbol],
            schedule.stream_rank[position],
            schedule.stream_count[schedule.symbol_stream[symbol] - 1],
            schedule.symbol_rank[position],
            schedule.symbol_count[symbol],
            schedule.base_cents[symbol],
            schedule.volatility_bp[symbol],
        )
        for position, symbol in enumerate(schedule.positions)
    ]
    return spark.createDataFrame(rows, SCHEDULE_SCHEMA)


def locate_rows(rates: DataFrame, schedule_df: DataFrame, cycle: int) -> DataFrame:
    """Add ``stream``, ``source_seq``, ``symbol`` and ``tick`` to rate-source rows.

    Args:
        rates: rows with a long ``value`` column (the rate source's row number).
        schedule_df: from :func:`schedule_frame`.
        cycle: the schedule's cycle length L.

    Returns:
        ``rates`` joined with the schedule; ``source_seq`` is gap-free per stream.
    """
    rounds = F.floor(F.col("value") / F.lit(cycle)).cast("long")
    located = rates.withColumn("position", F.pmod(F.col("value"), F.lit(cycle)).cast("long")).withColumn(
        "round", rounds
    )
    joined = located.join(F.broadcast(schedule_df), on="position")
    return joined.withColumn(
        COL_SEQ, F.col("round") * F.col("stream_count") + F.col("stream_rank") + F.lit(1)
    ).withColumn("tick", F.col("round") * F.col("symbol_count") + F.col("symbol_rank"))


def fix_timestamp(ns: Column) -> Column:
    """Format ns since the epoch as ``YYYYMMDD-HH:MM:SS.nnnnnnnnn`` (session time zone must be UTC)."""
    seconds = F.floor(ns / F.lit(NS_PER_S))
    fraction = F.pmod(ns, F.lit(NS_PER_S)).cast("string")
    return F.concat(
        F.date_format(F.timestamp_seconds(seconds), "yyyyMMdd-HH:mm:ss"), F.lit("."), F.lpad(fraction, 9, "0")
    )


def cents_text(cents: Column) -> Column:
    """Integer cents as decimal text with two places (``12345`` -> ``"123.45"``)."""
    whole = F.floor(cents / F.lit(100)).cast("string")
    return F.concat(whole, F.lit("."), F.lpad(F.pmod(cents, F.lit(100)).cast("string"), 2, "0"))


def fix_entry(entry_type: str, price: Column, size: Column) -> Column:
    """One ``279=0|269=T|270=P|271=S|`` entry group (null if price or size is null)."""
    return F.concat(
        F.lit(f"279=0{SOH}269={entry_type}{SOH}270="),
        price,
        F.lit(f"{SOH}271="),
        size.cast("string"),
        F.lit(SOH),
    )


def fix_body(*, seq: Column, symbol: Column, stamp: Column, entries: Column, entry_count: Column,
             sender: str) -> Column:  # fmt: skip
    """The body of a 35=X message as :func:`proto.fix.encode_market_data` builds it (from 35= on).

    Args:
        seq: source_seq (tag 34).
        symbol: tag 55.
        stamp: the event time as :func:`fix_timestamp` text (tags 52 and 60).
        entries: the concatenated entry groups.
        entry_count: tag 268.
        sender: SenderCompID (tag 49).

    Returns:
        A string column.
    """
    return F.concat(
        F.lit(f"35=X{SOH}49={sender}{SOH}34="),
        seq.cast("string"),
        F.lit(f"{SOH}52="),
        stamp,
        F.lit(f"{SOH}55="),
        symbol,
        F.lit(f"{SOH}60="),
        stamp,
        F.lit(f"{SOH}268="),
        entry_count.cast("string"),
        F.lit(SOH),
        entries,
    )


def fix_frame(body: Column) -> Column:
    """``8=FIX.4.4|9=<len>|<body>`` as binary: the message without its ``10=`` trailer.

    Pass a column reference, not an expression: the body is used twice.
    """
    head = F.concat(F.lit(f"8=FIX.4.4{SOH}9="), F.octet_length(body).cast("string"), F.lit(SOH))
    return F.concat(head, body).cast("binary")


def _encode(rows: DataFrame, *, entries: Column, entry_count: Column, sender: str) -> DataFrame:
    # One projection per stage, so the stamp and the body are computed once per
    # row (Spark does not collapse projections that would duplicate them).
    stamped = rows.withColumn("stamp", fix_timestamp(F.col(COL_EVENT_NS)))
    body = fix_body(seq=F.col(COL_SEQ), symbol=F.col("symbol"), stamp=F.col("stamp"), entries=entries,
                    entry_count=entry_count, sender=sender)  # fmt: skip
    with_body = stamped.withColumn("body", body)
    return with_body.select(
        F.col(COL_STREAM).cast("int").alias(COL_STREAM),
        F.col(COL_SEQ).cast("long").alias(COL_SEQ),
        F.col(COL_EVENT_NS).cast("long").alias(COL_EVENT_NS),
        fix_frame(F.col("body")).alias(COL_MESSAGE),
    )


def _noise(seed: int, salt: int, *columns: Column) -> Column:
    # A seeded, deterministic hash of the columns, as a long (Spark's xxhash64
    # gives the same answer on every executor and every run).
    return F.xxhash64(F.lit(seed), F.lit(salt), *columns)


def _mid_cents(seed: int) -> Column:
    # Strategy: a closed-form random walk. Summing hash noise held constant over
    # blocks of 2**j ticks, weighted by 2**(j/2), gives increments that look
    # like a random walk over ~2**OCTAVES ticks without any state, so any tick
    # of any symbol can be priced on its own (and re-priced identically).
    tick, symbol = F.col("tick"), F.col("symbol_number")
    walk: Column = F.lit(0.0)
    for octave in range(OCTAVES):
        block = F.shiftright(tick, octave)
        unit = (F.pmod(_noise(seed, octave, symbol, block), F.lit(2001)) - F.lit(1000)) / F.lit(1000.0)
        walk = walk + unit * F.lit(2 ** (octave / 2))
    return F.col("base_cents") * F.exp(walk * F.col("volatility_bp") / F.lit(10_000.0))


class SyntheticEncoder:
    """Turns rate-source rows into the feed's output rows (the synthetic market).

    The column expressions are built once here and reused for every
    micro-batch, because building them costs hundreds of Py4J calls; per batch
    only the event-time base changes, and it enters as one literal column.

    Args:
        schedule_df: from :func:`schedule_frame` (broadcast in the join).
        cycle: the schedule's cycle length.
        seed: the model seed (prices, sizes, trade/quote choice).
        sender: SenderCompID.
        interval_ns: event-time span of one batch.
        rows_per_batch: rows of every batch.
    """

    def __init__(self, schedule_df: DataFrame, *, cycle: int, seed: int, sender: str, interval_ns: int,
                 rows_per_batch: int) -> None:  # fmt: skip
        if interval_ns <= 0 or rows_per_batch <= 0:
            raise ValueError(f"interval_ns and rows_per_batch must be > 0: {interval_ns}, {rows_per_batch}")
        self._schedule = F.broadcast(schedule_df)
        self._cycle = cycle
        tick, symbol, value = F.col("tick"), F.col("symbol_number"), F.col("value")
        mid, bid, ask, is_trade = F.col("mid"), F.col("bid"), F.col("ask"), F.col("is_trade")
        noise = [F.pmod(_noise(seed, 100 + salt, symbol, tick), F.lit(modulus))
                 for salt, modulus in enumerate((3, 100, 2, 10, 64, 20))]  # fmt: skip
        half = F.greatest(F.lit(1.0), mid * F.lit(2e-4) * (F.lit(1) + noise[0]))
        trade_price = F.when(noise[2] == 0, bid).otherwise(ask)
        trade_size = F.lit(100) * (F.lit(1) + noise[3]) * F.when(noise[4] == 0, F.lit(25)).otherwise(F.lit(1))
        quote_size = F.lit(100) * (F.lit(1) + noise[5])
        bid_entry = fix_entry("0", cents_text(bid), quote_size)
        ask_entry = fix_entry("1", cents_text(ask), quote_size)
        trade_entry = fix_entry("2", cents_text(trade_price), trade_size)
        in_batch = F.pmod(value, F.lit(rows_per_batch))
        # Each dict is one projection, so every big expression is computed once
        # per row instead of being inlined into each column that uses it.
        self._stages: list[dict[str, Column]] = [
            {"position": F.pmod(value, F.lit(cycle)).cast("long"), "round": F.floor(value / F.lit(cycle))},
            {COL_SEQ: F.col("round") * F.col("stream_count") + F.col("stream_rank") + F.lit(1),
             "tick": F.col("round") * F.col("symbol_count") + F.col("symbol_rank"),
             COL_EVENT_NS: (F.col("base_ns") + F.floor(in_batch * F.lit(interval_ns) / F.lit(rows_per_batch)))
             .cast("long")},
            {"mid": _mid_cents(seed), "stamp": fix_timestamp(F.col(COL_EVENT_NS))},
            {"bid": F.greatest(F.lit(1), F.floor(mid - half)).cast("long"),
             "is_trade": noise[1] < TRADE_PERCENT},
            {"ask": F.greatest(F.ceil(mid + half), bid + F.lit(1)).cast("long")},
            {"entries": F.when(is_trade, trade_entry).otherwise(F.concat(bid_entry, ask_entry))},
            {"body": fix_body(seq=F.col(COL_SEQ), symbol=F.col("symbol"), stamp=F.col("stamp"),
                              entries=F.col("entries"), entry_count=F.when(is_trade, 1).otherwise(2),
                              sender=sender)},
        ]  # fmt: skip
        self._output = [
            F.col(COL_STREAM).cast("int").alias(COL_STREAM),
            F.col(COL_SEQ).cast("long").alias(COL_SEQ),
            F.col(COL_EVENT_NS),
            fix_frame(F.col("body")).alias(COL_MESSAGE),
        ]

    def encode(self, rates: DataFrame, *, base_ns: int) -> DataFrame:
        """Encode one batch.

        Args:
            rates: rows with a long ``value`` column, e.g. one micro-batch of
                the ``rate-micro-batch`` source.
            base_ns: event time of the batch's first row; row v gets
                ``base_ns + (v mod rows_per_batch) * interval_ns // rows_per_batch``.

        Returns:
            Rows of ``schema.OUTPUT_COLUMNS``.
        """
        frame = rates.withColumns({"base_ns": F.lit(base_ns), **self._stages[0]})
        frame = frame.join(self._schedule, on="position")
        for stage in self._stages[1:]:
            frame = frame.withColumns(stage)
        return frame.select(*self._output)

    def __repr__(self) -> str:
        return f"<SyntheticEncoder [cycle={self._cycle}, stages={len(self._stages)}]>"


def stream_number(symbol: Column, streams: Sequence[StreamSpec]) -> Column:
    """The source-stream number of a symbol by its initial, 0 when no stream covers it."""
    initial = F.upper(F.substring(symbol, 1, 1))
    result: Column = F.lit(0)
    for stream in reversed(streams):
        result = F.when(initial.between(stream.first, stream.last), F.lit(stream.number)).otherwise(result)
    return result


def with_row_order(ticks: DataFrame) -> DataFrame:
    """Add ``row_in_file`` to a file-source scan that has a ``file`` column (before any shuffle).

    ``row_in_file`` grows with the row's position in its file provided no file
    is split across partitions (the job sets ``spark.sql.files.maxPartitionBytes``
    to 1 GiB, above any tick file it supports).
    """
    return ticks.withColumn("row_in_file", F.monotonically_increasing_id())


def replay_messages(
    ticks: DataFrame, streams: Sequence[StreamSpec], bases: Mapping[int, int], *, sender: str
) -> DataFrame:
    """Number replayed ticks per stream in file order and encode them.

    Args:
        ticks: rows of ``schema.REPLAY_SCHEMA`` plus ``file`` and ``row_in_file``
            (:func:`with_row_order`), one static micro-batch.
        streams: the source streams.
        bases: per stream number, the last ``source_seq`` already assigned
            before this batch (0 when none).
        sender: SenderCompID.

    Returns:
        Rows of ``schema.OUTPUT_COLUMNS``; rows with no stream or no entry get
        stream 0 (the sink counts and drops them).
    """
    entries_list = [
        fix_entry("0", F.col("bid"), F.col("bid_size")),
        fix_entry("1", F.col("ask"), F.col("ask_size")),
        fix_entry("2", F.col("trade_price"), F.col("trade_size")),
    ]
    count: Column = F.lit(0)
    for entry in entries_list:
        count = count + F.when(entry.isNull(), F.lit(0)).otherwise(F.lit(1))
    valid = (count > 0) & F.col("event_time_ns").isNotNull() & (F.length("symbol") > 0)
    stream = F.when(valid, stream_number(F.col("symbol"), streams)).otherwise(F.lit(0))
    prepared = ticks.withColumn(COL_STREAM, stream).withColumn("entry_count", count)
    order = Window.partitionBy(COL_STREAM).orderBy("file", "row_in_file")
    base: Column = F.lit(0)
    for number, last in bases.items():
        base = F.when(F.col(COL_STREAM) == number, F.lit(last)).otherwise(base)
    numbered = prepared.withColumn(COL_SEQ, (F.row_number().over(order) + base).cast("long"))
    timed = numbered.withColumn(COL_EVENT_NS, F.col("event_time_ns"))
    entries = F.concat_ws("", *entries_list)
    return _encode(timed, entries=entries, entry_count=F.col("entry_count"), sender=sender)
