"""Spark schemas of the feed source: replay tick files and the output rows.

The replay tick-file schema (CSV with a header line, or Parquet with these
columns) is a public contract, documented in ``docs/spark-feed.md``:

==============  ======  ===========================================================
column          type    meaning
==============  ======  ===========================================================
event_time_ns   long    event time, ns since the Unix epoch (UTC); tags 52 and 60
symbol          string  instrument; its initial picks the source stream
bid             string  bid price as decimal text (empty: no bid entry)
bid_size        long    bid size
ask             string  offer price as decimal text (empty: no offer entry)
ask_size        long    offer size
trade_price     string  trade price as decimal text (empty: no trade entry)
trade_size      long    trade size
==============  ======  ===========================================================

Each row is one source message; its entries go out in the order bid, offer,
trade. A row with no entry at all, or whose symbol no source stream covers, is
dropped and counted.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql.types import LongType, StringType, StructField, StructType

REPLAY_SCHEMA: Final = StructType(
    [
        StructField("event_time_ns", LongType(), nullable=False),
        StructField("symbol", StringType(), nullable=False),
        StructField("bid", StringType(), nullable=True),
        StructField("bid_size", LongType(), nullable=True),
        StructField("ask", StringType(), nullable=True),
        StructField("ask_size", LongType(), nullable=True),
        StructField("trade_price", StringType(), nullable=True),
        StructField("trade_size", LongType(), nullable=True),
    ]
)

# Columns of what the transforms hand the sink, in this order.
COL_STREAM: Final = "stream"  # int, the 1-based source-stream number
COL_SEQ: Final = "source_seq"  # long, gap-free per stream
COL_EVENT_NS: Final = "event_ns"  # long, event time in ns
COL_MESSAGE: Final = "message"  # binary: the FIX message up to (excluding) its 10= trailer
OUTPUT_COLUMNS: Final = (COL_STREAM, COL_SEQ, COL_EVENT_NS, COL_MESSAGE)
