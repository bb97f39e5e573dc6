"""DataFrame -> DataFrame transforms of the feed source (no reading, no writing).

Theory of operation
-------------------
The replay source's rows end as ``schema.OUTPUT_COLUMNS``: the source-stream
number, the gap-free ``source_seq``, the event time and the FIX message built
in Spark SQL up to, but not including, its ``10=`` checksum trailer: one
``concat`` per template of :mod:`proto.fix` (the literals of the layout
around the columns), so the bytes are :func:`proto.fix.encode_market_data`'s.
The checksum is a byte sum that Spark SQL has no cheap function for, so the
driver-side sink adds it with numpy over the Arrow buffers (see
:func:`spark_feed.sink.finish_messages`). :func:`replay_messages` numbers a
micro-batch's rows per stream in file order (file path, then row position)
starting after the per-stream ``source_seq`` the previous batch ended on.

(The synthetic source needs none of this: its micro-batches bring only row
numbers to the driver, and :mod:`spark_feed.synthetic` makes the messages.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from feedha.proto import fix
from feedha.proto.template import Template
from feedha.spark_feed.model import StreamSpec
from feedha.spark_feed.schema import COL_EVENT_NS, COL_MESSAGE, COL_SEQ, COL_STREAM

NS_PER_S: Final = 1_000_000_000
# Octaves of the hash-noise random walk: 2**(OCTAVES-1) ticks is the longest wave.
OCTAVES: Final = 10
TRADE_PERCENT: Final = 30


def fix_timestamp(ns: Column) -> Column:
    """Format ns since the epoch as ``YYYYMMDD-HH:MM:SS.nnnnnnnnn`` (session time zone must be UTC)."""
    seconds = F.floor(ns / F.lit(NS_PER_S))
    fraction = F.pmod(ns, F.lit(NS_PER_S)).cast("string")
    return F.concat(
        F.date_format(F.timestamp_seconds(seconds), "yyyyMMdd-HH:mm:ss"), F.lit("."), F.lpad(fraction, 9, "0")
    )


def _concat(template: Template, **columns: Column) -> Column:
    # The template's literals and the columns in its slots, as one SQL concat
    # (null when any column is null).
    parts: list[Column] = []
    for literal, slot in template.pieces():
        if literal:
            parts.append(F.lit(literal.decode("ascii")))
        if slot is not None:
            parts.append(columns[slot])
    return F.concat(*parts)


def fix_entry(entry_type: str, price: Column, size: Column) -> Column:
    """One :data:`proto.fix.ENTRY` (``279=0|269=T|270=P|271=S|``); null if price or size is null."""
    entry = fix.ENTRY.substitute(entry_type=entry_type.encode())
    return _concat(entry, price=price, size=size.cast("string"))


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
    body = fix.MARKET_DATA.substitute(sender=sender.encode(), group=fix.ENTRY_GROUP)
    return _concat(body, seq=seq.cast("string"), sending_time=stamp, symbol=symbol, event_time=stamp,
                   entry_count=entry_count.cast("string"), entries=entries)  # fmt: skip


def fix_frame(body: Column) -> Column:
    """:data:`proto.fix.HEAD` and the body, as binary: the message without its ``10=`` trailer.

    Pass a column reference, not an expression: the body is used twice.
    """
    head = _concat(fix.HEAD, body_length=F.octet_length(body).cast("string"))
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
