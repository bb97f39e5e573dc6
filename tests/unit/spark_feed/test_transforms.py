"""spark_feed.transforms (the replay source) on static DataFrames (one shared local[1] SparkSession)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from feedha.proto import fix
from feedha.spark_feed import model, transforms
from feedha.spark_feed.schema import REPLAY_SCHEMA
from feedha.spark_feed.sink import finish_messages

# With the slow drills: a local SparkSession and its first job cost 25-30 s, a twentieth of the
# default suite's budget; the Spark drills (tests/integration/test_spark_*.py) run there too.
pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
]

SAMPLE = Path(transforms.__file__).parent / "sample"
STREAMS = model.parse_streams("A-M,N-Z")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[1]")
        .appName("spark-feed-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _messages(table: pa.Table) -> list[bytes]:
    column = table["message"].combine_chunks().cast(pa.large_binary())
    _v, offsets, data = column.buffers()
    off = np.frombuffer(offsets, dtype=np.int64)[column.offset : column.offset + len(column) + 1]
    out_offsets, out = finish_messages(off, np.frombuffer(data, dtype=np.uint8))
    return [out[a:b].tobytes() for a, b in zip(out_offsets[:-1], out_offsets[1:], strict=True)]


def test_stream_number_splits_by_initial(spark) -> None:
    frame = spark.createDataFrame([("AAPL",), ("mmm",), ("NVDA",), ("ZZ",), ("1X",)], "symbol string")
    got = frame.select(transforms.stream_number(frame["symbol"], STREAMS).alias("n")).collect()
    assert [r.n for r in got] == [1, 1, 2, 2, 0]


def test_replay_numbers_in_file_order_after_bases(spark) -> None:
    from pyspark.sql import functions as F

    ticks = spark.read.schema(REPLAY_SCHEMA).option("header", "true").csv(str(SAMPLE))
    ticks = transforms.with_row_order(ticks.select("*", F.col("_metadata.file_path").alias("file")))
    bad = spark.createDataFrame([(1, "9BAD", "1.00", 1, None, None, None, None, "zzz", 0)],
                                ticks.schema)  # fmt: skip
    table = transforms.replay_messages(
        ticks.unionByName(bad), STREAMS, {1: 10, 2: 0}, sender="FEED"
    ).toArrow()
    streams = table["stream"].to_pylist()
    assert streams.count(0) == 1
    expected = []
    for path in sorted(SAMPLE.glob("*.csv")):
        for line in path.read_text().splitlines()[1:]:
            expected.append(line.split(",")[1])
    by_stream: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for message, stream, seq in zip(_messages(table), streams, table["source_seq"].to_pylist(), strict=True):
        if stream:
            symbol = dict(fix.parse_fields(fix.split_messages(message)[0][0]))[fix.TAG_SYMBOL].decode()
            by_stream[stream].append((seq, symbol))
    for number, base in ((1, 10), (2, 0)):
        rows = sorted(by_stream[number])
        assert [seq for seq, _ in rows] == list(range(base + 1, base + 1 + len(rows)))
        in_files = [s for s in expected if model.stream_for(s, STREAMS).number == number]  # type: ignore[union-attr]
        assert [symbol for _, symbol in rows] == in_files


def test_the_sql_messages_are_proto_fix_byte_for_byte(spark) -> None:
    rows = [
        (1_767_277_800_000_266_613, "AAPL", None, None, None, None, "92.92", 1800, "f", 0),
        (1_767_277_800_001_934_585, "XOM", "76.98", 100, "77.00", 600, None, None, "f", 1),
        (1_767_277_801_000_000_000, "NVDA", "1.5", 1, "2", 2, "1.75", 3, "f", 2),
    ]
    from pyspark.sql.types import StructType

    schema = StructType(list(REPLAY_SCHEMA.fields)).add("file", "string").add("row_in_file", "long")
    ticks = spark.createDataFrame(rows, schema)
    table = transforms.replay_messages(ticks, STREAMS, {1: 10, 2: 0}, sender="FEED").toArrow()
    expected = []
    for (event_ns, symbol, bid, bid_size, ask, ask_size, trade, trade_size, _f, _r), seq in zip(
        rows, table["source_seq"].to_pylist(), strict=True
    ):
        entries = [
            fix.SourceEntry(kind, price, size)
            for kind, price, size in (
                (fix.ENTRY_BID, bid, bid_size),
                (fix.ENTRY_OFFER, ask, ask_size),
                (fix.ENTRY_TRADE, trade, trade_size),
            )
            if price is not None
        ]
        expected.append(
            fix.encode_market_data(source_seq=seq, symbol=symbol, event_time_ns=event_ns, entries=entries)
        )
    assert _messages(table) == expected
    assert table["source_seq"].to_pylist() == [11, 1, 2]
